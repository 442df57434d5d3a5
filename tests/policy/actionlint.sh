#!/usr/bin/env bash
# Lints the GitHub workflows (.github/workflows) with actionlint, built from the
# Go module proxy at a pinned version (it is not a dependency of the module).
#
#   tests/policy/actionlint.sh            lint every workflow
#   ACTIONLINT_BIN=/some/dir ...          where to install actionlint (default: ~/.cache/ai-flock/bin)
#
# actionlint runs shellcheck on `run:` scripts when shellcheck is on PATH
# (Debian: apt-get install shellcheck). Exits non-zero on any finding; the last
# line is "N passed, M failed" (one count per workflow file).
set -euo pipefail

ACTIONLINT_VERSION=v1.7.12

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bindir="${ACTIONLINT_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/ai-flock/bin}"
bin="$bindir/actionlint"

if ! [ -x "$bin" ] || [ "$("$bin" -version 2>/dev/null | head -n1)" != "$ACTIONLINT_VERSION" ]; then
	echo "installing actionlint $ACTIONLINT_VERSION into $bindir"
	mkdir -p "$bindir"
	# Outside the module's go.mod: `go install pkg@version` resolves actionlint's own dependencies.
	(cd "$bindir" && GOBIN="$bindir" GOFLAGS="" go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION")
fi

cd "$root"
shopt -s nullglob
files=(.github/workflows/*.yml .github/workflows/*.yaml)
if [ ${#files[@]} -eq 0 ]; then
	echo "no workflow files in .github/workflows"
	echo "0 passed, 1 failed"
	exit 1
fi
if ! command -v shellcheck >/dev/null 2>&1; then
	echo "note: shellcheck is not installed; run: scripts are not checked"
fi

passed=0 failed=0
for f in "${files[@]}"; do
	if "$bin" -no-color "$f"; then
		echo "ok   $f"
		passed=$((passed + 1))
	else
		echo "FAIL $f"
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
