#!/usr/bin/env bash
# The unit and mock-engine tests (`make test`): every package's tests but the
# Docker suites, in -short mode, results never cached.
#
# `go test` links every test binary again on every run, and on 2 cores that
# linking was most of the step (about 55 of its 80 CPU-seconds). Here each
# binary is built with `go test -c` into a directory kept between runs:
# the go command relinks a binary only when its build ID changed (a change
# in the package or anything it imports), so a second run links nothing
# and a change in one package relinks only the binaries that import it.
# The binaries are stripped (-s -w): a third less to link, and a test's
# panic still prints file and line.
#
# Then each binary runs in its package's directory, as `go test` runs it,
# up to FLOCK_TEST_JOBS at once (8, as `go test -p 8`).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
jobs=${FLOCK_TEST_JOBS:-8}
# One directory per checkout (two worktrees never write the same binary),
# outside it (the VM's synced folder and the image contexts stay small).
cache=${XDG_CACHE_HOME:-$HOME/.cache}
bin=${FLOCK_TEST_BIN:-$cache/ai-flock/test-bin/$(pwd -P | sha256sum | cut -c1-12)}
mkdir -p "$bin"
pwd -P >"$bin/checkout"
# The binaries of checkouts that are gone (a clone deleted) go with them.
for other in "$cache"/ai-flock/test-bin/*/; do
	if [ -f "$other/checkout" ] && [ ! -d "$(cat "$other/checkout")" ]; then
		rm -rf "$other"
	fi
done

module=$($GO list -m)
mapfile -t pkgs < <($GO list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Name}} {{.Dir}}{{end}}' ./... |
	grep -Ev "^$module/tests/e2e(/cluster|/fargate)? ")

# go test -c -o DIR/ names a binary after its package's last path element
# (a main package's too): two packages ending alike would overwrite.
dupes=$(for p in "${pkgs[@]}"; do read -r path _ _ <<<"$p"; echo "${path##*/}"; done | sort | uniq -d)
if [ -n "$dupes" ]; then
	echo "tests/unit.sh: two test packages end in the same name ($dupes); rename one" >&2
	exit 1
fi

paths=()
for p in "${pkgs[@]}"; do read -r path _ _ <<<"$p"; paths+=("$path"); done
$GO test -c -o "$bin/" -vet=off -ldflags='-s -w' "${paths[@]}"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
run_one() { # path dir binary logs
	local name=${1##*/} start end rc=0
	start=$(date +%s%N)
	(cd "$2" && "$3" -test.short -test.paniconexit0 -test.timeout=10m0s) >"$4/$name.out" 2>&1 || rc=$?
	end=$(date +%s%N)
	if [ "$rc" -eq 0 ]; then
		printf 'ok  \t%s\t%d.%03ds\n' "$1" $(((end - start) / 1000000000)) $((((end - start) / 1000000) % 1000)) >"$4/$name.sum"
	else
		{ cat "$4/$name.out"; printf 'FAIL\t%s (exit %d)\n' "$1" "$rc"; } >"$4/$name.sum"
	fi
	return "$rc"
}
export -f run_one
status=0
for p in "${pkgs[@]}"; do
	read -r path _ dir <<<"$p"
	bin_file="$bin/${path##*/}.test"
	[ -x "$bin_file" ] || continue # a package whose tests are all in an excluded build
	printf '%s\0%s\0%s\0%s\0' "$path" "$dir" "$bin_file" "$logs"
done | xargs -0 -n 4 -P "$jobs" bash -c 'run_one "$@"' _ || status=$?
for p in "${pkgs[@]}"; do
	read -r path _ _ <<<"$p"
	[ -f "$logs/${path##*/}.sum" ] && cat "$logs/${path##*/}.sum"
done
if [ "$status" -ne 0 ]; then
	echo FAIL
	exit 1
fi
