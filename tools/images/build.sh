#!/usr/bin/env bash
# Builds the lab's images from the package registries only (Debian's archive and the Go module
# proxy), into the local Docker engine, each cached by its inputs:
#   node [--kubernetes vX.Y.Z]...  the lab's node image gpu-tenancy/node:<version> (default: every
#                                  version the stacks pin); pause and busybox built first
#   pause TAG | busybox            the two images a node carries so that it pulls nothing
#   control-plane [--kubernetes vX.Y.Z]... [--component NAME]...
#                                  registry.k8s.io/<component>:<version> for kube-apiserver,
#                                  kube-controller-manager and kube-scheduler (--component: only
#                                  those named) at each version (default: every pinned version),
#                                  from the node image's wrapper module with the same version
#                                  ldflags, cgo off: FROM scratch with the binary at upstream's
#                                  /usr/local/bin/<component>, a /tmp, no entrypoint (the manifest
#                                  gives the command). kube-proxy is not built yet: it needs
#                                  iptables in its image (upstream's carries them), not scratch.
#   --push MIRROR_HOST (any target) then copies what the target built (each node image, the pause
#                                  and busybox images, each control-plane image) into the lab's
#                                  registry mirror under their upstream names (tools/lab/mirror-push.sh)
#   --push-ca FILE                 with --push: the mirror's CA (PEM), for an https mirror whose
#                                  certificate the system does not trust
# Prints each image's build time (cold when nothing was cached) and size.
# Needs: a Docker engine (tools/lab/docker.sh starts one), Go, debootstrap, gcc, busybox-static, jq.
set -euo pipefail
# shellcheck source=tools/lib.sh
. "$(dirname "$0")/../lib.sh"
IMAGES=$ROOT/tools/images
WORK=$CACHE/images
mkdir -p "$WORK"
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What a node needs beside kubelet/kubeadm/kubectl: systemd as PID 1 (kubeadm starts and restarts
# the kubelet through it), the container runtime, and what kubeadm and kube-proxy call.
PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,iproute2,socat,conntrack,ethtool,ca-certificates,curl,kmod,procps,util-linux,mount,jq
NODE_REPOSITORY=$(cd "$ROOT" && python3 -c 'from components.config.versions import LAB_NODE_REPOSITORY as r; print(r)')
BUSYBOX_IMAGE=gpu-tenancy/busybox
# What each image's wrapper module (tools/go/node/<version>/tools.go) must import: the node's
# binaries and the control-plane images' (tests/unit/test_node_image.py reads both lists).
NODE_BINARIES=(kubelet kubeadm kubectl)
CONTROL_PLANE_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler)
# The layout of a control-plane image, part of its cache key (change it when the layout changes).
CONTROL_PLANE_LAYOUT="scratch /usr/local/bin/NAME /tmp PATH no-entrypoint"
# What this run built (or found cached), in order: what --push copies.
BUILT=()
PUSH=""
PUSH_CA=""

need() { command -v "$1" >/dev/null || { echo "error: $1 not found ($2)" >&2; exit 2; }; }

# inputs_hash DIR_FILE_OR_WORD...: one hash of the build's inputs (the image's cache key): a
# directory's files by their paths inside it and their contents, a file's contents, any other word
# as it is; so a checkout elsewhere finds the same key, and an edited file a new one.
inputs_hash() {
  (for p in "$@"; do
    if [ -d "$p" ]; then (cd "$p" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    elif [ -f "$p" ]; then sha256sum <"$p"
    else printf '%s\n' "$p"; fi
  done) | sha256sum | cut -c1-16
}

# cached IMAGE KEY: true when IMAGE exists with that key (nothing to do).
cached() { [ "$(docker image inspect -f '{{index .Config.Labels "gpu-tenancy.inputs"}}' "$1" 2>/dev/null)" = "$2" ]; }

report() { # report IMAGE START
  local size
  size=$(docker image inspect -f '{{.Size}}' "$1")
  log "$1: $(( $(date +%s) - $2 )) s, $(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1e6}') MB"
}

# import_dir DIR IMAGE KEY [CHANGES...]: a FROM-scratch image from a directory.
import_dir() {
  local dir=$1 image=$2 key=$3; shift 3
  local args=(--change "LABEL gpu-tenancy.inputs=$key")
  for c in "$@"; do args+=(--change "$c"); done
  tar -C "$dir" --numeric-owner -c . | docker import "${args[@]}" - "$image" >/dev/null
}

build_pause() { # build_pause IMAGE (the tag kubeadm of the node's version expects)
  local image=$1 key start
  key=$(inputs_hash "$IMAGES/pause" "$image")
  cached "$image" "$key" && { log "$image: cached"; return; }
  start=$(date +%s)
  local dir; dir=$(mktemp -d)
  gcc -static -O2 -o "$dir/pause" "$IMAGES/pause/pause.c"
  strip "$dir/pause"
  import_dir "$dir" "$image" "$key" 'ENTRYPOINT ["/pause"]'
  rm -rf "$dir"
  report "$image" "$start"
}

build_busybox() { # Debian's busybox-static (1.35) with its applets, FROM scratch
  need busybox "apt-get install busybox-static"
  local version image key start dir
  version=$(dpkg-query -W -f '${Version}' busybox-static | sed 's/^1://; s/-.*//')
  image=$BUSYBOX_IMAGE:$version
  key=$(inputs_hash "$(command -v busybox)" "$version")
  cached "$image" "$key" && { log "$image: cached"; echo "$image"; return; }
  start=$(date +%s)
  dir=$(mktemp -d)
  mkdir -p "$dir/bin" "$dir/tmp"
  install -m 0755 "$(command -v busybox)" "$dir/bin/busybox"
  for applet in $("$dir/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$dir/bin/$applet"
  done
  chmod 1777 "$dir/tmp"
  import_dir "$dir" "$image" "$key" 'CMD ["sh"]' 'ENV PATH=/bin'
  rm -rf "$dir"
  report "$image" "$start" >&2
  echo "$image"
}

rootfs() { # a debootstrap rootfs tarball with PACKAGES, cached by the package list
  local tarball
  tarball=$WORK/rootfs-$SUITE-$(inputs_hash "$PACKAGES" "$MIRROR").tar
  if [ ! -s "$tarball" ]; then
    need debootstrap "apt-get install debootstrap"
    local start=$SECONDS dir
    dir=$(mktemp -d)
    log "rootfs: debootstrap $SUITE ($MIRROR)"
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$dir" "$MIRROR" >&2
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" --numeric-owner -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$dir"
    log "rootfs: $((SECONDS - start)) s, $(( $(stat -c %s "$tarball") / 1000000 )) MB"
  fi
  echo "$tarball"
}

build_node() { # build_node VERSION (vX.Y.Z)
  local version=$1 module
  module=$(node_module "$version")
  local start; start=$(date +%s)
  for name in "${NODE_BINARIES[@]}"; do build_kube "$name" "${version#v}" "$module"; done
  local bin=$CACHE/kube/$version
  "$bin/kubelet" --version | grep -qx "Kubernetes $version" || { echo "error: kubelet does not report $version" >&2; exit 1; }
  local pause; pause=$("$bin/kubeadm" config images list --kubernetes-version "$version" 2>/dev/null | grep '/pause:')
  build_pause "$pause"
  local busybox; busybox=$(build_busybox)
  local tarball; tarball=$(rootfs)
  local image=$NODE_REPOSITORY:$version key
  key=$(inputs_hash "$IMAGES/node" "$ROOT/tools/lab/lab-runc" "$ROOT/tools/go/$module" "$tarball" "$pause" "$busybox" \
    "$(docker image inspect -f '{{.Id}}' "$pause" "$busybox")")
  BUILT+=("$pause" "$busybox" "$image")
  if cached "$image" "$key"; then log "$image: cached"; return; fi
  local dir; dir=$(mktemp -d)
  tar -C "$dir" -xf "$tarball"
  cp -a "$IMAGES/node/rootfs/." "$dir/"
  install -m 0755 "$ROOT/tools/lab/lab-runc" "$dir/usr/local/sbin/lab-runc"
  for name in "${NODE_BINARIES[@]}"; do install -m 0755 "$bin/$name" "$dir/usr/bin/$name"; done
  mkdir -p "$dir/etc/gpu-tenancy" "$dir/opt/gpu-tenancy/images" "$dir/etc/cni/net.d" "$dir/etc/containerd/certs.d" \
    "$dir/etc/kubernetes/manifests"
  echo "$pause" > "$dir/etc/gpu-tenancy/pause-image"
  echo "$version" > "$dir/etc/gpu-tenancy/kubernetes-version"
  docker save "$pause" > "$dir/opt/gpu-tenancy/images/pause.tar"
  docker save "$busybox" > "$dir/opt/gpu-tenancy/images/busybox.tar"
  # Units on (what systemctl enable would link), and the ones a container has no use for off.
  local wants=$dir/etc/systemd/system/multi-user.target.wants
  mkdir -p "$wants"
  for unit in containerd gpu-tenancy-node-setup gpu-tenancy-images kubelet gpu-tenancy-network; do
    ln -sf "/etc/systemd/system/$unit.service" "$wants/$unit.service"
  done
  ln -sf /lib/systemd/system/containerd.service "$wants/containerd.service"
  for unit in getty.target systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
    systemd-remount-fs.service sys-kernel-debug.mount sys-kernel-tracing.mount; do
    ln -sf /dev/null "$dir/etc/systemd/system/$unit"
  done
  : > "$dir/etc/machine-id"   # made at first boot: each node its own
  import_dir "$dir" "$image" "$key" 'ENV container=docker' 'ENTRYPOINT ["/sbin/init"]' \
    "LABEL gpu-tenancy.kubernetes-version=$version"
  rm -rf "$dir"
  report "$image" "$start"
}

node_module() { # node_module VERSION: the wrapper module (relative to tools/go), or exit 2
  local version=$1
  [ -f "$ROOT/tools/go/node/$version/go.mod" ] || {
    echo "error: no wrapper module tools/go/node/$version for Kubernetes $version (pinned: $(cd "$ROOT/tools/go/node" && printf '%s ' *))" >&2
    exit 2
  }
  echo "node/$version"
}

build_control_plane() { # build_control_plane VERSION COMPONENT
  local version=$1 name=$2 module
  module=$(node_module "$version")
  local image=registry.k8s.io/$name:$version key start
  key=$(inputs_hash "$ROOT/tools/go/$module" "$name" "$version" "$CONTROL_PLANE_LAYOUT")
  BUILT+=("$image")
  if cached "$image" "$key"; then log "$image: cached"; return; fi
  start=$(date +%s)
  # The binary lands in the cache beside the node's, but $BIN keeps what tools/build.sh linked
  # there (the integration tier's own control plane).
  NO_BIN_LINK=1 build_kube "$name" "${version#v}" "$module"
  local bin=$CACHE/kube/$version/$name
  "$bin" --version | grep -qx "Kubernetes $version" || { echo "error: $name does not report $version" >&2; exit 1; }
  local dir; dir=$(mktemp -d)
  mkdir -p "$dir/usr/local/bin" "$dir/tmp"
  chmod 1777 "$dir/tmp"
  install -m 0755 "$bin" "$dir/usr/local/bin/$name"
  import_dir "$dir" "$image" "$key" 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "LABEL gpu-tenancy.kubernetes-version=$version"
  rm -rf "$dir"
  report "$image" "$start"
}

pinned_versions() {
  (cd "$ROOT" && python3 -c 'from components.config.versions import KIND_NODE_IMAGES; print(*KIND_NODE_IMAGES)')
}

usage() {
  echo "usage: tools/images/build.sh node [--kubernetes vX.Y.Z]... | control-plane [--kubernetes vX.Y.Z]... [--component NAME]... | pause TAG | busybox   [--push MIRROR_HOST [--push-ca FILE]]" >&2
  exit 2
}

# push: what this run built, each once, into the mirror.
push() {
  [ -n "$PUSH" ] || return 0
  local -A seen=()
  local images=() image
  for image in "${BUILT[@]}"; do
    [ -n "${seen[$image]:-}" ] || { seen[$image]=1; images+=("$image"); }
  done
  log "pushing ${#images[@]} image(s) to $PUSH"
  local ca=()
  [ -z "$PUSH_CA" ] || ca=(--ca "$PUSH_CA")
  bash "$ROOT/tools/lab/mirror-push.sh" "${ca[@]}" "$PUSH" "${images[@]}"
}

need docker "apt-get install docker.io"
docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (start one: bash tools/lab/docker.sh)" >&2; exit 2; }
target=${1:-}
shift || true
versions=()
components=()
pause_tag=""
while [ $# -gt 0 ]; do
  case "$target:$1" in
    *:--push) PUSH=${2:-}; [ -n "$PUSH" ] || { echo "error: --push needs the mirror's host[:port]" >&2; exit 2; }; shift 2 ;;
    *:--push-ca) PUSH_CA=${2:-}; [ -f "$PUSH_CA" ] || { echo "error: --push-ca needs the CA's PEM file" >&2; exit 2; }; shift 2 ;;
    node:--kubernetes | control-plane:--kubernetes) versions+=("${2:?--kubernetes needs a version}"); shift 2 ;;
    control-plane:--component)
      case " ${CONTROL_PLANE_COMPONENTS[*]} " in
        *" ${2:-} "*) components+=("$2") ;;
        *) if [ "${2:-}" = kube-proxy ]; then
             echo "error: kube-proxy is not built yet (its image needs iptables; a FROM-scratch image cannot run it)" >&2
           else
             echo "error: --component ${2:-}: expected one of ${CONTROL_PLANE_COMPONENTS[*]}" >&2
           fi
           exit 2 ;;
      esac
      shift 2 ;;
    pause:-*) echo "error: unknown argument $1" >&2; exit 2 ;;
    pause:*) [ -z "$pause_tag" ] || usage; pause_tag=$1; shift ;;
    *) echo "error: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -z "$PUSH_CA" ] || [ -n "$PUSH" ] || { echo "error: --push-ca goes with --push" >&2; exit 2; }
case "$target" in
  node)
    [ ${#versions[@]} -gt 0 ] || read -ra versions <<< "$(pinned_versions)"
    for v in "${versions[@]}"; do build_node "$v"; done
    ;;
  control-plane)
    [ ${#versions[@]} -gt 0 ] || read -ra versions <<< "$(pinned_versions)"
    [ ${#components[@]} -gt 0 ] || components=("${CONTROL_PLANE_COMPONENTS[@]}")
    for v in "${versions[@]}"; do
      for c in "${components[@]}"; do build_control_plane "$v" "$c"; done
    done
    ;;
  pause)
    build_pause "${pause_tag:?pause needs the image tag, e.g. registry.k8s.io/pause:3.10.1}"
    BUILT+=("$pause_tag")
    ;;
  busybox) BUILT+=("$(build_busybox)") ;;
  *) usage ;;
esac
push
