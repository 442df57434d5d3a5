#!/usr/bin/env bash
# Go and the Pulumi CLI from their official, checksum-pinned archives (sourced).
#
#   FLOCK_SKIP_GO=1 / FLOCK_SKIP_PULUMI=1    leave the tool alone
#   FLOCK_GO_TARBALL / FLOCK_PULUMI_TARBALL  install from this local archive
#                                            instead of downloading it (still
#                                            checksum-verified)
#   FLOCK_GO_VERSION / FLOCK_PULUMI_VERSION  install another version; then
#   FLOCK_GO_SHA256 / FLOCK_PULUMI_SHA256    the archive's sha256 is required
#
# Idempotency: a tool is (re)installed only when the installed version differs
# from the wanted one.

: "${FLOCK_SKIP_GO:=0}"
: "${FLOCK_SKIP_PULUMI:=0}"
: "${FLOCK_GO_TARBALL:=}"
: "${FLOCK_PULUMI_TARBALL:=}"
: "${FLOCK_GO_VERSION:=$FLOCK_PINNED_GO_VERSION}"
: "${FLOCK_PULUMI_VERSION:=$FLOCK_PINNED_PULUMI_VERSION}"
: "${FLOCK_GO_SHA256:=}"
: "${FLOCK_PULUMI_SHA256:=}"

FLOCK_GO_ROOT=/usr/local/go
FLOCK_PULUMI_ROOT=/opt/pulumi

# fetch_archive NAME URL LOCAL_OVERRIDE SHA256 DEST
fetch_archive() {
  local name=$1 url=$2 local_file=$3 sha=$4 dest=$5
  if [[ -n $local_file ]]; then
    [[ -f $local_file ]] || die "$name archive $local_file does not exist"
    cp "$local_file" "$dest"
  else
    download "$url" "$dest"
  fi
  verify_sha256 "$dest" "$sha"
}

installed_go_version() {
  [[ -x $FLOCK_GO_ROOT/bin/go && -f $FLOCK_GO_ROOT/VERSION ]] || return 0
  head -n1 "$FLOCK_GO_ROOT/VERSION"
}

install_go() {
  step "Go"
  if is_true "$FLOCK_SKIP_GO"; then
    skipped "Go (FLOCK_SKIP_GO=1)"
    return 0
  fi
  local version=$FLOCK_GO_VERSION arch sha work
  arch=$(deb_arch)
  if [[ $(installed_go_version) == "go$version" ]]; then
    unchanged "Go $version in $FLOCK_GO_ROOT"
  else
    sha=$FLOCK_GO_SHA256
    [[ -n $sha ]] || sha=$(pinned_go_sha256 "$version" "$arch") ||
      die "no pinned checksum for Go $version on $arch; set FLOCK_GO_SHA256 (from https://go.dev/dl/?mode=json&include=all)"
    work=$(mktemp -d /usr/local/.flock-go.XXXXXX)
    cleanup_later "$work"
    fetch_archive Go "https://go.dev/dl/go$version.linux-$arch.tar.gz" "$FLOCK_GO_TARBALL" "$sha" "$work/go.tar.gz"
    tar -C "$work" -xzf "$work/go.tar.gz"
    [[ $(head -n1 "$work/go/VERSION" 2>/dev/null) == "go$version" ]] ||
      die "the Go archive does not contain go$version"
    "$work/go/bin/go" version >/dev/null || die "the unpacked go binary does not run"
    swap_in "$work/go" "$FLOCK_GO_ROOT"
    rm -rf "$work"
    changed "Go $version in $FLOCK_GO_ROOT"
  fi
  # On PATH for every shell, sudo's secure_path and `vagrant ssh -c` alike.
  ensure_symlink /usr/local/bin/go "$FLOCK_GO_ROOT/bin/go"
  ensure_symlink /usr/local/bin/gofmt "$FLOCK_GO_ROOT/bin/gofmt"
}

# swap_in NEW DIR: replaces DIR with the unpacked and checked tree NEW (on
# the same filesystem), the old one moved aside first, so DIR is only ever
# missing between two renames, never half written.
swap_in() {
  local new=$1 dir=$2
  rm -rf "$dir.old"
  if [[ -e $dir ]]; then mv "$dir" "$dir.old"; fi
  mv "$new" "$dir"
  rm -rf "$dir.old"
}

installed_pulumi_version() {
  [[ -x $FLOCK_PULUMI_ROOT/pulumi ]] || return 0
  local home
  home=$(mktemp -d)
  PULUMI_HOME=$home PULUMI_SKIP_UPDATE_CHECK=true "$FLOCK_PULUMI_ROOT/pulumi" version 2>/dev/null | head -n1 || true
  rm -rf "$home"
}

install_pulumi() {
  step "Pulumi CLI"
  if is_true "$FLOCK_SKIP_PULUMI"; then
    skipped "Pulumi CLI (FLOCK_SKIP_PULUMI=1)"
    return 0
  fi
  local version=$FLOCK_PULUMI_VERSION arch sha work f link
  case "$(deb_arch)" in
    amd64) arch=x64 ;;
    arm64) arch=arm64 ;;
    *) die "the Pulumi CLI has no release for $(deb_arch)" ;;
  esac
  if [[ $(installed_pulumi_version) == "v$version" ]]; then
    unchanged "Pulumi CLI $version in $FLOCK_PULUMI_ROOT"
  else
    sha=$FLOCK_PULUMI_SHA256
    [[ -n $sha ]] || sha=$(pinned_pulumi_sha256 "$version" "$arch") ||
      die "no pinned checksum for Pulumi $version on $arch; set FLOCK_PULUMI_SHA256 (from pulumi-$version-checksums.txt on the GitHub release)"
    mkdir -p "$(dirname "$FLOCK_PULUMI_ROOT")"
    work=$(mktemp -d "$(dirname "$FLOCK_PULUMI_ROOT")/.flock-pulumi.XXXXXX")
    cleanup_later "$work"
    fetch_archive Pulumi "https://get.pulumi.com/releases/sdk/pulumi-v$version-linux-$arch.tar.gz" \
      "$FLOCK_PULUMI_TARBALL" "$sha" "$work/pulumi.tar.gz"
    tar -C "$work" -xzf "$work/pulumi.tar.gz"
    [[ -x $work/pulumi/pulumi ]] || die "the Pulumi archive has no pulumi/pulumi"
    swap_in "$work/pulumi" "$FLOCK_PULUMI_ROOT"
    rm -rf "$work"
    [[ $(installed_pulumi_version) == "v$version" ]] ||
      die "the installed pulumi does not report v$version"
    changed "Pulumi CLI $version in $FLOCK_PULUMI_ROOT"
  fi
  # pulumi finds its language hosts (pulumi-language-go, ...) on PATH.
  for f in "$FLOCK_PULUMI_ROOT"/pulumi*; do
    ensure_symlink "/usr/local/bin/$(basename "$f")" "$f"
  done
  # Drop links to binaries an older release had and this one has not.
  for link in /usr/local/bin/pulumi*; do
    [[ -L $link && $(readlink "$link") == "$FLOCK_PULUMI_ROOT"/* && ! -e $link ]] || continue
    rm -f "$link"
    changed "$link (stale link removed)"
  done
}
