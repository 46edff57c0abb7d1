# Shared by tools/build.sh and tools/images/build.sh: the cache, logging, and how a Kubernetes
# binary is built from Go modules.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=tools/versions.env
. "$ROOT/tools/versions.env"
CACHE=${GPU_TENANCY_CACHE:-$HOME/.cache/gpu-tenancy}
BIN=$CACHE/bin
export GOFLAGS=-mod=mod
mkdir -p "$BIN"

log() { printf '[build] %s\n' "$*" >&2; }

# have NAME VERSION_REGEX ARGS...: true when NAME on PATH (outside our cache) prints the version.
have() {
  local name=$1 want=$2; shift 2
  local found
  found=$(PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$BIN" | paste -sd: -) command -v "$name" 2>/dev/null) || return 1
  "$found" "$@" 2>/dev/null | grep -qE "$want" || return 1
  ln -sf "$found" "$BIN/$name"
  log "$name: using $found"
}

# kube_ldflags VERSION (vX.Y.Z): what `make` in k8s.io/kubernetes stamps into every binary.
# Without it a binary built from modules reports v0.0.0-master, which kubeadm's version and skew
# checks refuse.
kube_ldflags() {
  local version=$1 major minor flags="" pkg
  major=${version#v}; major=${major%%.*}
  minor=${version#v*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags="$flags -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags="$flags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  printf '%s' "${flags# }"
}

# build NAME VERSION MODULE_DIR PKG [LDFLAGS]: go build into $CACHE/NAME/VERSION once
# ($CACHE/$OUTDIR/VERSION when OUTDIR is set); MODULE_DIR is relative to tools/go.
# CGO_ENABLED passes through (0 for binaries that run in scratch images). The binary is linked
# into $BIN (what tools/build.sh's env.sh puts on PATH) unless NO_BIN_LINK is set.
build() {
  local name=$1 version=$2 dir=$3 pkg=$4 ldflags=${5:-}
  local out=$CACHE/${OUTDIR:-$name}/$version
  if [ ! -x "$out/$name" ]; then
    local start=$SECONDS work
    work=$(mktemp -d)
    cp -r "$ROOT/tools/go/$dir/." "$work/"
    log "$name $version: building (module tools/go/$dir)"
    if [ -n "${PRE_BUILD:-}" ]; then (cd "$work" && eval "$PRE_BUILD"); fi
    mkdir -p "$out"
    (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
    mv "$out/$name.tmp" "$out/$name"
    rm -rf "$work"
    log "$name $version: built in $((SECONDS - start)) s"
  fi
  [ -n "${NO_BIN_LINK:-}" ] || ln -sf "$out/$name" "$BIN/$name"
}

# build_kube NAME VERSION MODULE_DIR: one k8s.io/kubernetes command at VERSION (X.Y.Z) with its
# version stamped, cached under $CACHE/kube/vVERSION/ (a static binary: it also runs in a node).
build_kube() {
  local name=$1 version=$2 dir=$3
  CGO_ENABLED=0 OUTDIR=kube build "$name" "v$version" "$dir" "k8s.io/kubernetes/cmd/$name" "$(kube_ldflags "v$version")"
}
