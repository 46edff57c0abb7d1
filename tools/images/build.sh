#!/usr/bin/env bash
# Builds the lab's images from the package registries only (Debian's archive and the Go module
# proxy), into the local Docker engine, each cached by its inputs:
#   node [--kubernetes vX.Y.Z]...  the lab's node image gpu-tenancy/node:<version> (default: every
#                                  version the stacks pin); pause and busybox built first
#   pause TAG | busybox            the two images a node carries so that it pulls nothing
#   control-plane [--kubernetes vX.Y.Z]... [--component NAME]...
#                                  registry.k8s.io/<component>:<version> for kube-apiserver,
#                                  kube-controller-manager, kube-scheduler and kube-proxy
#                                  (--component: only those named) at each version (default: every
#                                  pinned version), from the node image's wrapper module with the
#                                  same version ldflags, cgo off, the binary at upstream's
#                                  /usr/local/bin/<component>, no entrypoint (the manifest gives the
#                                  command): FROM scratch with a /tmp, but kube-proxy on a Debian
#                                  minbase rootfs with iptables, conntrack, ipset, kmod, iproute2
#                                  (what it calls)
#   etcd [--kubernetes vX.Y.Z]...  registry.k8s.io/etcd:<tag>, the tag kubeadm of each version lists
#                                  (default: every pinned version), from tools/go/images/etcd/<v>:
#                                  FROM scratch, /usr/local/bin/etcd, /tmp, /var/lib/etcd, no
#                                  entrypoint (kubeadm's static pod runs `etcd ...`)
#   coredns [--version vX.Y.Z]...  registry.k8s.io/coredns/coredns:<v> (default: what kubeadm of each
#                                  pinned version lists, and the tenants' TENANT_COREDNS_IMAGE), from
#                                  tools/go/images/coredns/<v>: FROM scratch, ENTRYPOINT /coredns
#   konnectivity                   KONNECTIVITY_IMAGES (proxy-server, proxy-agent) from
#                                  tools/go/images/konnectivity/<v>: FROM scratch, /proxy-server and
#                                  /proxy-agent as their entrypoints (Kamaji runs those commands)
#   local-path-provisioner         LOCAL_PATH_PROVISIONER_IMAGE from
#                                  tools/go/images/local-path-provisioner/<v>: FROM scratch,
#                                  /usr/bin/local-path-provisioner, CMD as upstream's
#   kwok                           KWOK_IMAGE: /usr/local/bin/kwok as its entrypoint, FROM scratch
#                                  (tools/build.sh's kwok where static, else `go install` of the tag)
#   python                         LAB_PYTHON_IMAGE, a base for the release controller's image
#                                  (config images.releaserBase): a Debian minbase rootfs with
#                                  python3.11, python3-venv, ca-certificates, a venv at /opt/python
#                                  first on PATH (pip installs there: PEP 668), CMD python3
#   kamaji-etcd                    KAMAJI_ETCD_IMAGE, the etcd of Kamaji's default DataStore, from
#                                  tools/go/images/etcd/<v>: FROM scratch, /usr/local/bin/etcd, CMD
#                                  as upstream's (the StatefulSet runs `etcd ...`)
#   kamaji-etcd-jobs               the images kamaji-etcd's hook jobs run, FROM scratch with Debian's
#                                  busybox-static at /bin (their scripts run `sh -c`, `bash -c`: bash
#                                  is busybox's ash) and a user 1000: KAMAJI_ETCD_CFSSL_IMAGE
#                                  (/usr/bin/cfssl, /usr/bin/cfssljson from tools/go/images/cfssl/<v>),
#                                  KAMAJI_ETCD_KUBECTL_IMAGE (/usr/local/bin/kubectl, the node's of
#                                  MANAGEMENT_KUBERNETES_VERSION), KAMAJI_ETCD_CLIENT_IMAGE
#                                  (/usr/local/bin/etcdctl from tools/go/images/etcdctl/<v>)
#   management                     what the management node runs: node, control-plane, etcd and CoreDNS
#                                  at MANAGEMENT_KUBERNETES_VERSION (kubeadm's tags), the provisioner
#   all                            node and control-plane at every pinned version, then etcd, coredns,
#                                  konnectivity, local-path-provisioner, kwok, python, kamaji-etcd and
#                                  kamaji-etcd-jobs; a summary at the end
#   --push MIRROR_HOST (any target) then copies what the target built (each image above, and the
#                                  pause and busybox images a node carries) into the lab's
#                                  registry mirror under their upstream names (tools/lab/mirror-push.sh)
#   --push-ca FILE                 with --push: the mirror's CA (PEM), for an https mirror whose
#                                  certificate the system does not trust
#   --rebuild (any target)         builds every image of the target again, its cache key ignored
#                                  (a cold measurement: bench/management_node.py --cold)
# Image names, tags and module versions come from components/config/versions.py and kubeadm's
# `config images list`. Every Go binary of an image is built with cgo off and -trimpath, and
# checked to be statically linked. Prints each image's build time (cold when nothing was cached)
# and size. An image built again under its name (new inputs, --rebuild) replaces the old one,
# which is removed.
# Needs: a Docker engine (tools/lab/docker.sh starts one), Go, debootstrap, gcc, busybox-static, jq,
# file.
set -euo pipefail
shopt -s inherit_errexit   # a failure inside $(...) (rootfs, kubeadm's list) stops the build too
# shellcheck source=tools/lib.sh
. "$(dirname "$0")/../lib.sh"
IMAGES=$ROOT/tools/images
WORK=$CACHE/images
mkdir -p "$WORK"
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What a node needs beside kubelet/kubeadm/kubectl: systemd as PID 1 (kubeadm starts and restarts
# the kubelet through it), the container runtime, and what kubeadm and kube-proxy call.
NODE_PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,iproute2,socat,conntrack,ethtool,ca-certificates,curl,kmod,procps,util-linux,mount,jq
# What kube-proxy calls: iptables/ip6tables (Debian's default, the nft backend, as the node's own),
# ipset, conntrack (to flush UDP entries), modprobe, ip.
KUBE_PROXY_PACKAGES=iptables,conntrack,ipset,kmod,iproute2
# The release controller's base: Debian's Python 3.11 (externally managed, PEP 668: pip installs
# into a venv, so python3-venv) and the CA bundle pip's downloads are checked against.
PYTHON_PACKAGES=python3.11,python3-venv,ca-certificates
NODE_REPOSITORY=$(cd "$ROOT" && python3 -c 'from components.config.versions import LAB_NODE_REPOSITORY as r; print(r)')
BUSYBOX_IMAGE=gpu-tenancy/busybox
# What each image's wrapper module (tools/go/node/<version>/tools.go) must import: the node's
# binaries and the control-plane images' (tests/unit/test_node_image.py reads both lists).
NODE_BINARIES=(kubelet kubeadm kubectl)
CONTROL_PLANE_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
# Each image's layout, part of its cache key (change it when the layout changes).
CONTROL_PLANE_LAYOUT="scratch /usr/local/bin/NAME /tmp PATH no-entrypoint"
KUBE_PROXY_LAYOUT="debian-minbase /usr/local/bin/kube-proxy PATH no-entrypoint"
ETCD_LAYOUT="scratch /usr/local/bin/etcd /tmp /var/lib/etcd PATH no-entrypoint"
COREDNS_LAYOUT="scratch /coredns /tmp PATH entrypoint root"
KONNECTIVITY_LAYOUT="scratch /NAME /tmp PATH entrypoint"
LOCAL_PATH_PROVISIONER_LAYOUT="scratch /usr/bin/local-path-provisioner /tmp PATH cmd"
KWOK_LAYOUT="scratch /usr/local/bin/kwok /tmp PATH entrypoint"
PYTHON_LAYOUT="debian-minbase venv:/opt/python PATH:/opt/python/bin cmd:python3"
KAMAJI_ETCD_LAYOUT="scratch /usr/local/bin/etcd /tmp /var/etcd /var/lib/etcd PATH workdir cmd"
# The jobs' images: busybox at /bin, bash as ash, /etc/passwd with root and nonroot (1000), /tmp;
# NAME at its upstream path.
JOB_LAYOUT="scratch busybox /bin/bash=ash passwd:1000 /tmp PATH"
PATH_ENV='ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
# What this run built (or found cached), in order: what --push copies.
BUILT=()
PUSH=""
PUSH_CA=""
REBUILD=""

need() { command -v "$1" >/dev/null || { echo "error: $1 not found ($2)" >&2; exit 2; }; }

# config NAME: a value of components/config/versions.py (a tuple's items space-separated).
config() {
  (cd "$ROOT" && python3 -c 'import sys
from components.config import versions
value = getattr(versions, sys.argv[1])
print(value if isinstance(value, str) else " ".join(value))' "$1")
}

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

# cached IMAGE KEY: true when IMAGE exists with that key (nothing to do); under --rebuild, only once
# this run has built it (a node's pause and busybox are built once for every version).
cached() {
  if [ -n "$REBUILD" ] && ! awk -v i="$1" '$1 == i && $2 != "cached" { f = 1 } END { exit !f }' "$SUMMARY"; then
    return 1
  fi
  [ "$(docker image inspect -f '{{index .Config.Labels "gpu-tenancy.inputs"}}' "$1" 2>/dev/null)" = "$2" ]
}

# What this run built or found, one line each (IMAGE SECONDS|cached BYTES), for the summary; a
# file, since some builders run in a command substitution.
SUMMARY=$(mktemp)
trap 'rm -f "$SUMMARY"' EXIT

report() { # report IMAGE START
  local size seconds=$(( $(date +%s) - $2 ))
  size=$(docker image inspect -f '{{.Size}}' "$1")
  echo "$1 $seconds $size" >> "$SUMMARY"
  log "$1: $seconds s, $(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1e6}') MB"
}

found() { # found IMAGE: cached, nothing built
  echo "$1 cached $(docker image inspect -f '{{.Size}}' "$1")" >> "$SUMMARY"
  log "$1: cached"
}

# wanted IMAGE KEY: IMAGE is this run's (what --push copies); false, said once, where it is already
# built with that key, so the caller has nothing to do.
wanted() {
  BUILT+=("$1")
  if cached "$1" "$2"; then found "$1"; return 1; fi
}

summary() { # each image once (as first seen), its seconds and size; the run's seconds, the MB together
  log "summary: image, seconds to build it (cached: nothing to do), size"
  awk -v total="$1" '!seen[$1]++ {
      printf "[build] %-60s %8s %9.1f MB\n", $1, ($2 == "cached" ? "cached" : $2 " s"), $3 / 1e6; mb += $3 / 1e6; n++
    }
    END { printf "[build] %d image(s): %d s, %.1f MB\n", n, total, mb }' "$SUMMARY" >&2
}

# reports LINE COMMAND...: refused unless COMMAND prints LINE (an extended regular expression, whole
# line). Its output is read whole first: grep -q would close the pipe on a longer output.
reports() {
  local want=$1 out; shift
  out=$("$@" 2>&1)
  grep -qxE "$want" <<< "$out" || { echo "error: $* does not print $want: $(head -n 5 <<< "$out")" >&2; exit 1; }
}

static() { # static BINARY: refused unless statically linked (scratch images have no libc)
  file -L "$1" | grep -q 'statically linked' || { echo "error: $1 is not statically linked: $(file -L "$1")" >&2; exit 1; }
}

# go_static NAME VERSION MODULE_DIR PKG [LDFLAGS]: a static binary (cgo off), built once into
# $CACHE/images/NAME/VERSION/NAME (outside $BIN: these are the images', not the tests').
go_static() {
  CGO_ENABLED=0 NO_BIN_LINK=1 OUTDIR=images/$1 build "$@"
  static "$CACHE/images/$1/$2/$1"
}

# scratch_image IMAGE KEY BINARY PATH_IN_IMAGE [CHANGES...]: a FROM-scratch image with the binary,
# a /tmp (sticky, world-writable: klog and glog write there) and the directories in $DIRS.
scratch_image() {
  local image=$1 key=$2 binary=$3 path=$4; shift 4
  local dir d; dir=$(mktemp -d)
  chmod 0755 "$dir"   # the image's / as in any image (mktemp makes it 0700)
  mkdir -p "$dir/tmp" "$dir$(dirname "$path")"
  for d in ${DIRS:-}; do mkdir -p "$dir/$d"; done
  chmod 1777 "$dir/tmp"
  install -m 0755 "$binary" "$dir$path"
  import_dir "$dir" "$image" "$key" "$@"
  rm -rf "$dir"
}

# wrapper_module KIND VERSION WHAT: tools/go/images/KIND/VERSION (relative to tools/go), or exit 2.
wrapper_module() {
  [ -f "$ROOT/tools/go/images/$1/$2/go.mod" ] || {
    echo "error: no wrapper module tools/go/images/$1/$2 for $3 (have: $(cd "$ROOT/tools/go/images/$1" 2>/dev/null && printf '%s ' *))" >&2
    exit 2
  }
  echo "images/$1/$2"
}

# import_dir DIR IMAGE KEY [CHANGES...]: a FROM-scratch image from a directory. The image it
# replaces under that name is removed once no name is left on it (a container using it keeps it).
import_dir() {
  local dir=$1 image=$2 key=$3; shift 3
  local args=(--change "LABEL gpu-tenancy.inputs=$key") before
  for c in "$@"; do args+=(--change "$c"); done
  before=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  tar -C "$dir" --numeric-owner -c . | docker import "${args[@]}" - "$image" >/dev/null
  if [ -n "$before" ] && [ "$(docker image inspect -f '{{.Id}}' "$image")" != "$before" ] &&
    [ -z "$(docker image inspect -f '{{join .RepoTags ""}}' "$before" 2>/dev/null)" ]; then
    docker image rm "$before" >/dev/null 2>&1 || true
  fi
}

build_pause() { # build_pause IMAGE (the tag kubeadm of the node's version expects)
  local image=$1 key start
  key=$(inputs_hash "$IMAGES/pause" "$image")
  cached "$image" "$key" && { found "$image"; return; }
  start=$(date +%s)
  local dir; dir=$(mktemp -d)
  gcc -static -O2 -o "$dir/pause" "$IMAGES/pause/pause.c"
  strip "$dir/pause"
  import_dir "$dir" "$image" "$key" 'ENTRYPOINT ["/pause"]'
  rm -rf "$dir"
  report "$image" "$start"
}

busybox_tree() { # busybox_tree DIR: Debian's busybox-static at DIR/bin, a link per applet, a /tmp
  need busybox "apt-get install busybox-static"
  local dir=$1 applet
  mkdir -p "$dir/bin" "$dir/tmp"
  install -m 0755 "$(command -v busybox)" "$dir/bin/busybox"
  for applet in $("$dir/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$dir/bin/$applet"
  done
  chmod 1777 "$dir/tmp"
}

build_busybox() { # Debian's busybox-static (1.35) with its applets, FROM scratch
  need busybox "apt-get install busybox-static"
  local version image key start dir
  version=$(dpkg-query -W -f '${Version}' busybox-static | sed 's/^1://; s/-.*//')
  image=$BUSYBOX_IMAGE:$version
  key=$(inputs_hash "$(command -v busybox)" "$version")
  cached "$image" "$key" && { found "$image"; echo "$image"; return; }
  start=$(date +%s)
  dir=$(mktemp -d)
  busybox_tree "$dir"
  import_dir "$dir" "$image" "$key" 'CMD ["sh"]' 'ENV PATH=/bin'
  rm -rf "$dir"
  report "$image" "$start" >&2
  echo "$image"
}

rootfs() { # rootfs PACKAGES: a debootstrap minbase tarball with PACKAGES, cached by the package list
  local packages=$1 tarball
  tarball=$WORK/rootfs-$SUITE-$(inputs_hash "$packages" "$MIRROR").tar
  if [ ! -s "$tarball" ]; then
    need debootstrap "apt-get install debootstrap"
    local start=$SECONDS dir
    dir=$(mktemp -d)
    log "rootfs: debootstrap $SUITE ($MIRROR) with $packages"
    debootstrap --variant=minbase --include="$packages" "$SUITE" "$dir" "$MIRROR" >&2
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
  for name in "${NODE_BINARIES[@]}"; do static "$bin/$name"; done
  "$bin/kubelet" --version | grep -qx "Kubernetes $version" || { echo "error: kubelet does not report $version" >&2; exit 1; }
  local pause; pause=$(kubeadm_image "$version" pause)
  build_pause "$pause"
  local busybox; busybox=$(build_busybox)
  local tarball; tarball=$(rootfs "$NODE_PACKAGES")
  local image=$NODE_REPOSITORY:$version key
  # This function's own text is an input too: a change to the recipe rebuilds the image.
  key=$(inputs_hash "$IMAGES/node" "$ROOT/tools/lab/lab-runc" "$ROOT/tools/go/$module" "$tarball" "$pause" "$busybox" \
    "$(docker image inspect -f '{{.Id}}' "$pause" "$busybox")" "$(declare -f build_node)")
  BUILT+=("$pause" "$busybox" "$image")
  if cached "$image" "$key"; then found "$image"; return; fi
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
  for unit in containerd gpu-tenancy-node-setup gpu-tenancy-images kubelet gpu-tenancy-network gpu-tenancy-dns; do
    ln -sf "/etc/systemd/system/$unit.service" "$wants/$unit.service"
  done
  ln -sf /lib/systemd/system/containerd.service "$wants/containerd.service"
  for unit in getty.target systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
    systemd-remount-fs.service sys-kernel-debug.mount sys-kernel-tracing.mount; do
    ln -sf /dev/null "$dir/etc/systemd/system/$unit"
  done
  # The machine ID is made at first boot, so each node has its own (the Node's machineID is how the
  # stack tells a replaced worker from the one before it). dbus's install wrote one into /var: systemd
  # would copy it at boot, giving every node from this image the same ID; Debian's link replaces it.
  : > "$dir/etc/machine-id"
  rm -f "$dir/var/lib/dbus/machine-id" "$dir/var/lib/systemd/random-seed"
  ln -s /etc/machine-id "$dir/var/lib/dbus/machine-id"
  no_machine_id "$dir"
  import_dir "$dir" "$image" "$key" 'ENV container=docker' 'ENTRYPOINT ["/sbin/init"]' \
    "LABEL gpu-tenancy.kubernetes-version=$version"
  rm -rf "$dir"
  report "$image" "$start"
}

# no_machine_id DIR: exit 1 when the root file system in DIR carries a machine ID (a non-empty
# /etc/machine-id, or a regular file where dbus keeps one), which every node would share.
no_machine_id() {
  local dir=$1
  if [ -s "$dir/etc/machine-id" ] || { [ -f "$dir/var/lib/dbus/machine-id" ] && [ ! -L "$dir/var/lib/dbus/machine-id" ]; }; then
    echo "error: the node image would carry a machine ID, shared by every node made from it" >&2
    exit 1
  fi
}

node_module() { # node_module VERSION: the wrapper module (relative to tools/go), or exit 2
  local version=$1
  [ -f "$ROOT/tools/go/node/$version/go.mod" ] || {
    echo "error: no wrapper module tools/go/node/$version for Kubernetes $version (pinned: $(cd "$ROOT/tools/go/node" && printf '%s ' *))" >&2
    exit 2
  }
  echo "node/$version"
}

# build_kubeadm VERSION: kubeadm of VERSION, built into the cache beside the node's binaries
# ($BIN keeps what it had).
build_kubeadm() {
  local module
  module=$(node_module "$1")
  NO_BIN_LINK=1 build_kube kubeadm "${1#v}" "$module"
}

# kubeadm_image VERSION NAME: the image kubeadm of VERSION uses for NAME (pause, etcd, coredns), as
# its `config images list` says; kubeadm is built first where the cache lacks it.
kubeadm_image() {
  local version=$1 name=$2
  build_kubeadm "$version"
  "$CACHE/kube/$version/kubeadm" config images list --kubernetes-version "$version" 2>/dev/null |
    grep -E "/$name:" || { echo "error: kubeadm $version lists no $name image" >&2; exit 1; }
}

build_control_plane() { # build_control_plane VERSION COMPONENT
  local version=$1 name=$2 module
  module=$(node_module "$version")
  local image=registry.k8s.io/$name:$version key start tarball=""
  if [ "$name" = kube-proxy ]; then
    # Upstream's image carries iptables too (distroless-iptables); the rootfs is a file input.
    start=$(date +%s)
    tarball=$(rootfs "$KUBE_PROXY_PACKAGES")
    key=$(inputs_hash "$ROOT/tools/go/$module" "$name" "$version" "$KUBE_PROXY_LAYOUT" "$tarball")
  else
    key=$(inputs_hash "$ROOT/tools/go/$module" "$name" "$version" "$CONTROL_PLANE_LAYOUT")
  fi
  wanted "$image" "$key" || return 0
  [ -n "$tarball" ] || start=$(date +%s)
  # The binary lands in the cache beside the node's, but $BIN keeps what tools/build.sh linked
  # there (the integration tier's own control plane).
  NO_BIN_LINK=1 build_kube "$name" "${version#v}" "$module"
  local bin=$CACHE/kube/$version/$name
  static "$bin"
  reports "Kubernetes $version" "$bin" --version
  if [ -n "$tarball" ]; then
    local dir; dir=$(mktemp -d)
    tar -C "$dir" -xf "$tarball"
    install -m 0755 "$bin" "$dir/usr/local/bin/$name"
    import_dir "$dir" "$image" "$key" "$PATH_ENV" "LABEL gpu-tenancy.kubernetes-version=$version"
    rm -rf "$dir"
  else
    scratch_image "$image" "$key" "$bin" "/usr/local/bin/$name" "$PATH_ENV" \
      "LABEL gpu-tenancy.kubernetes-version=$version"
  fi
  report "$image" "$start"
}

# etcd_module IMAGE: the wrapper module of registry.k8s.io/etcd:X.Y.Z-N (vX.Y.Z), or exit 2.
etcd_module() { local tag=${1##*:}; wrapper_module etcd "v${tag%-*}" "$1"; }
coredns_module() { wrapper_module coredns "${1##*:}" "$1"; }   # coredns_module IMAGE (tag vX.Y.Z)

build_etcd() { # build_etcd IMAGE (registry.k8s.io/etcd:X.Y.Z-N, as kubeadm names it)
  local image=$1 version module key start
  module=$(etcd_module "$image")
  version=${module##*/}
  key=$(inputs_hash "$ROOT/tools/go/$module" "$image" "$ETCD_LAYOUT")
  wanted "$image" "$key" || return 0
  start=$(date +%s)
  go_static etcd "$version" "$module" .
  local bin=$CACHE/images/etcd/$version/etcd
  reports "etcd Version: ${version#v}" "$bin" --version
  DIRS=var/lib/etcd scratch_image "$image" "$key" "$bin" /usr/local/bin/etcd "$PATH_ENV"
  report "$image" "$start"
}

# CoreDNS runs as root here: upstream's image runs it as a non-root user with cap_net_bind_service
# set on the binary, which an imported layer does not carry; kubeadm's Deployment adds
# NET_BIND_SERVICE (and drops the rest), which is what a root process needs for port 53.
build_coredns() { # build_coredns IMAGE (.../coredns:vX.Y.Z)
  local image=$1 version=${1##*:} module key start
  module=$(coredns_module "$image")
  key=$(inputs_hash "$ROOT/tools/go/$module" "$image" "$COREDNS_LAYOUT")
  wanted "$image" "$key" || return 0
  start=$(date +%s)
  go_static coredns "$version" "$module" .
  local bin=$CACHE/images/coredns/$version/coredns
  reports "CoreDNS-${version#v}" "$bin" -version
  scratch_image "$image" "$key" "$bin" /coredns "$PATH_ENV" 'ENTRYPOINT ["/coredns"]'
  report "$image" "$start"
}

konnectivity_module() {
  local version images
  version=$(config KONNECTIVITY_VERSION)
  images=$(config KONNECTIVITY_IMAGES)
  wrapper_module konnectivity "$version" "$images"
}
local_path_provisioner_module() {
  local version image
  version=$(config LOCAL_PATH_PROVISIONER_VERSION)
  image=$(config LOCAL_PATH_PROVISIONER_IMAGE)
  wrapper_module local-path-provisioner "$version" "$image"
}

build_konnectivity() { # both images of KONNECTIVITY_IMAGES from one wrapper module
  local version images image name pkg module key start bin
  version=$(config KONNECTIVITY_VERSION)
  images=$(config KONNECTIVITY_IMAGES)
  module=$(konnectivity_module)
  for image in $images; do
    case "${image%:*}" in
      */proxy-server) name=proxy-server; pkg=sigs.k8s.io/apiserver-network-proxy/cmd/server ;;
      */proxy-agent) name=proxy-agent; pkg=sigs.k8s.io/apiserver-network-proxy/cmd/agent ;;
      *) echo "error: $image: expected a proxy-server or proxy-agent image" >&2; exit 2 ;;
    esac
    key=$(inputs_hash "$ROOT/tools/go/$module" "$image" "$name" "$KONNECTIVITY_LAYOUT")
    wanted "$image" "$key" || continue
    start=$(date +%s)
    go_static "$name" "$version" "$module" "$pkg"
    bin=$CACHE/images/$name/$version/$name
    # Neither binary has a version flag: its build information names the module it came from and
    # the client it was built with.
    reports "\s+mod\s+sigs\.k8s\.io/apiserver-network-proxy\s+$version\s.*" go version -m "$bin"
    reports "\s+dep\s+sigs\.k8s\.io/apiserver-network-proxy/konnectivity-client\s+$version\s.*" go version -m "$bin"
    scratch_image "$image" "$key" "$bin" "/$name" "$PATH_ENV" "ENTRYPOINT [\"/$name\"]"
    report "$image" "$start"
  done
}

build_local_path_provisioner() {
  local version image module key start bin
  version=$(config LOCAL_PATH_PROVISIONER_VERSION)
  image=$(config LOCAL_PATH_PROVISIONER_IMAGE)
  module=$(local_path_provisioner_module)
  key=$(inputs_hash "$ROOT/tools/go/$module" "$image" "$LOCAL_PATH_PROVISIONER_LAYOUT")
  wanted "$image" "$key" || return 0
  start=$(date +%s)
  # main.VERSION is what upstream's scripts/build stamps (the tag).
  go_static local-path-provisioner "$version" "$module" github.com/rancher/local-path-provisioner \
    "-X main.VERSION=$version"
  bin=$CACHE/images/local-path-provisioner/$version/local-path-provisioner
  reports "local-path-provisioner version $version" "$bin" --version
  scratch_image "$image" "$key" "$bin" /usr/bin/local-path-provisioner "$PATH_ENV" 'CMD ["local-path-provisioner"]'
  report "$image" "$start"
}

build_kwok() { # tools/build.sh's kwok where it is static, else `go install` of the tag with cgo off
  local version image key start bin
  version=$(config KWOK_VERSION)
  image=$(config KWOK_IMAGE)
  key=$(inputs_hash "sigs.k8s.io/kwok/cmd/kwok@v$version" "$image" "$KWOK_LAYOUT")
  wanted "$image" "$key" || return 0
  start=$(date +%s)
  bin=$CACHE/kwok/$version/kwok
  if ! { [ -x "$bin" ] && file -L "$bin" | grep -q 'statically linked'; }; then
    bin=$CACHE/images/kwok/v$version/kwok
    if [ ! -x "$bin" ]; then
      log "kwok v$version: building (sigs.k8s.io/kwok/cmd/kwok@v$version, cgo off)"
      # go install of a tag builds from the module's own go.mod and go.sum.
      mkdir -p "${bin%/*}"
      GOBIN=${bin%/*} CGO_ENABLED=0 GOFLAGS="" go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@v$version"
      log "kwok v$version: built in $(( $(date +%s) - start )) s"
    fi
  fi
  static "$bin"
  reports "kwok version v$version .*" "$bin" --version
  # Upstream's entrypoint (images/kwok/Dockerfile).
  scratch_image "$image" "$key" "$bin" /usr/local/bin/kwok "$PATH_ENV" 'ENTRYPOINT ["/usr/local/bin/kwok"]'
  report "$image" "$start"
}

# The release controller's base (images.releaserBase): Debian's python3.11 with a venv made in the
# rootfs at build time, first on PATH, so that the Dockerfile's `pip install` and `python` are the
# venv's (Debian's own Python refuses pip installs: PEP 668). Not the official python image.
build_python() {
  local image key start tarball dir
  image=$(config LAB_PYTHON_IMAGE)
  start=$(date +%s)
  tarball=$(rootfs "$PYTHON_PACKAGES")
  key=$(inputs_hash "$image" "$PYTHON_LAYOUT" "$tarball")
  wanted "$image" "$key" || return 0
  dir=$(mktemp -d)
  tar -C "$dir" -xf "$tarball"
  chroot "$dir" /usr/bin/python3.11 -m venv /opt/python
  reports "Python 3\.11\.[0-9]+" chroot "$dir" /opt/python/bin/python --version
  reports "pip [0-9.]+ from /opt/python/lib/python3\.11/site-packages/pip \(python 3\.11\)" \
    chroot "$dir" /opt/python/bin/pip --version
  import_dir "$dir" "$image" "$key" 'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    'CMD ["python3"]'
  rm -rf "$dir"
  report "$image" "$start"
}

kamaji_etcd_module() { wrapper_module etcd "$(config KAMAJI_ETCD_VERSION)" "$(config KAMAJI_ETCD_IMAGE)"; }
etcdctl_module() { wrapper_module etcdctl "$(config KAMAJI_ETCD_CLIENT_VERSION)" "$(config KAMAJI_ETCD_CLIENT_IMAGE)"; }
cfssl_module() { wrapper_module cfssl "$(config CFSSL_VERSION)" "$(config KAMAJI_ETCD_CFSSL_IMAGE)"; }

build_kamaji_etcd() { # the etcd of kamaji-etcd's StatefulSet: upstream's layout (etcd only: all it runs)
  local version image module key start bin
  version=$(config KAMAJI_ETCD_VERSION)
  image=$(config KAMAJI_ETCD_IMAGE)
  module=$(kamaji_etcd_module)
  key=$(inputs_hash "$ROOT/tools/go/$module" "$image" "$KAMAJI_ETCD_LAYOUT")
  wanted "$image" "$key" || return 0
  start=$(date +%s)
  go_static etcd "$version" "$module" .
  bin=$CACHE/images/etcd/$version/etcd
  reports "etcd Version: ${version#v}" "$bin" --version
  DIRS="var/etcd var/lib/etcd" scratch_image "$image" "$key" "$bin" /usr/local/bin/etcd "$PATH_ENV" \
    'WORKDIR /var/lib/etcd' 'CMD ["/usr/local/bin/etcd"]'
  report "$image" "$start"
}

# job_tree DIR: what kamaji-etcd's job scripts need around their commands: busybox's applets at /bin,
# `bash` as busybox's ash (the scripts run `bash -c`; ash takes their `&>`), and the user 1000 the
# jobs run as, with a home of its own (kubectl keeps its discovery cache there; upstream's kubectl
# image names that user nonroot).
job_tree() {
  local dir=$1
  chmod 0755 "$dir"
  busybox_tree "$dir"
  printf '#!/bin/sh\nexec /bin/sh "$@"\n' > "$dir/bin/bash"
  chmod 0755 "$dir/bin/bash"
  mkdir -p "$dir/etc" "$dir/root" "$dir/home/nonroot"
  printf 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:1000:1000:nonroot:/home/nonroot:/bin/sh\n' > "$dir/etc/passwd"
  printf 'root:x:0:\nnonroot:x:1000:\n' > "$dir/etc/group"
  chown 1000:1000 "$dir/home/nonroot"
}

# job_image IMAGE KEY BINARY:PATH... -- CHANGES...: a FROM-scratch job image (job_tree) with each
# binary at its path.
job_image() {
  local image=$1 key=$2 dir pair; shift 2
  dir=$(mktemp -d)
  job_tree "$dir"
  while [ "$1" != -- ]; do
    pair=$1; shift
    mkdir -p "$dir$(dirname "${pair#*:}")"
    install -m 0755 "${pair%%:*}" "$dir${pair#*:}"
  done
  shift
  import_dir "$dir" "$image" "$key" "$@"
  rm -rf "$dir"
}

# kamaji_etcd_jobs_modules: every module the jobs' images need (exit 2 naming the first missing),
# and the kubectl tag the chart gives the management cluster's version (v<major>.<minor>).
kamaji_etcd_jobs_modules() {
  local version image
  cfssl_module >/dev/null
  etcdctl_module >/dev/null
  version=$(config MANAGEMENT_KUBERNETES_VERSION)
  image=$(config KAMAJI_ETCD_KUBECTL_IMAGE)
  [ "${image##*:}" = "${version%.*}" ] || {
    echo "error: $image: kamaji-etcd tags kubectl ${version%.*} for Kubernetes $version" >&2
    exit 2
  }
  node_module "$version" >/dev/null
}

build_kamaji_etcd_kubectl() { # the jobs' kubectl: the management version's, tagged by its minor
  local version image module key start bin
  version=$(config MANAGEMENT_KUBERNETES_VERSION)
  image=$(config KAMAJI_ETCD_KUBECTL_IMAGE)
  module=$(node_module "$version")
  key=$(inputs_hash "$ROOT/tools/go/$module" "$image" "$version" "$JOB_LAYOUT" /usr/local/bin/kubectl \
    "$(command -v busybox)")
  wanted "$image" "$key" || return 0
  start=$(date +%s)
  NO_BIN_LINK=1 build_kube kubectl "${version#v}" "$module"
  bin=$CACHE/kube/$version/kubectl
  static "$bin"
  reports "Client Version: $version" "$bin" version --client
  # Upstream's user and entrypoint (clastix/kubectl's Dockerfile).
  job_image "$image" "$key" "$bin:/usr/local/bin/kubectl" -- "$PATH_ENV" 'USER 1000:1000' \
    'ENTRYPOINT ["kubectl"]' "LABEL gpu-tenancy.kubernetes-version=$version"
  report "$image" "$start"
}

build_kamaji_etcd_cfssl() { # cfssl and cfssljson where upstream's image has them (/usr/bin)
  local version image module key start name
  version=$(config CFSSL_VERSION)
  image=$(config KAMAJI_ETCD_CFSSL_IMAGE)
  module=$(cfssl_module)
  key=$(inputs_hash "$ROOT/tools/go/$module" "$image" "$JOB_LAYOUT" /usr/bin/cfssl /usr/bin/cfssljson \
    "$(command -v busybox)")
  wanted "$image" "$key" || return 0
  start=$(date +%s)
  for name in cfssl cfssljson; do
    # The version upstream's Makefile stamps (the tag without its v).
    go_static "$name" "$version" "$module" "github.com/cloudflare/cfssl/cmd/$name" \
      "-X github.com/cloudflare/cfssl/cli/version.version=${version#v}"
  done
  local bin=$CACHE/images
  reports "Version: ${version#v}" "$bin/cfssl/$version/cfssl" version
  reports "Version: ${version#v}" "$bin/cfssljson/$version/cfssljson" -version
  job_image "$image" "$key" "$bin/cfssl/$version/cfssl:/usr/bin/cfssl" \
    "$bin/cfssljson/$version/cfssljson:/usr/bin/cfssljson" -- "$PATH_ENV" 'WORKDIR /workdir' \
    'ENTRYPOINT ["cfssl"]' 'CMD ["--help"]'
  report "$image" "$start"
}

build_kamaji_etcd_client() { # the post-install job's etcd client: etcdctl (all it calls) and a shell
  local version image module key start bin
  version=$(config KAMAJI_ETCD_CLIENT_VERSION)
  image=$(config KAMAJI_ETCD_CLIENT_IMAGE)
  module=$(etcdctl_module)
  key=$(inputs_hash "$ROOT/tools/go/$module" "$image" "$JOB_LAYOUT" /usr/local/bin/etcdctl \
    "$(command -v busybox)")
  wanted "$image" "$key" || return 0
  start=$(date +%s)
  go_static etcdctl "$version" "$module" .
  bin=$CACHE/images/etcdctl/$version/etcdctl
  reports "etcdctl version: ${version#v}" "$bin" version
  job_image "$image" "$key" "$bin:/usr/local/bin/etcdctl" -- "$PATH_ENV"
  report "$image" "$start"
}

build_kamaji_etcd_jobs() {
  build_kamaji_etcd_cfssl
  build_kamaji_etcd_kubectl
  build_kamaji_etcd_client
}

unique() { awk 'NF && !seen[$0]++'; }   # each line once, in order

# build_each etcd|coredns IMAGES (one a line): every image's module checked first, so that one
# missing is refused before anything is built; then each image once.
build_each() {
  local kind=$1 list image
  list=$(unique <<< "$2")
  for image in $list; do "${kind}_module" "$image" >/dev/null; done
  for image in $list; do "build_$kind" "$image"; done
}

etcd_images() { # etcd_images VERSION...: what kubeadm of each lists
  local v
  for v in "$@"; do kubeadm_image "$v" etcd; done
}

coredns_images() { # coredns_images VERSION...: what kubeadm of each lists, and the tenants' CoreDNS
  local v
  for v in "$@"; do kubeadm_image "$v" coredns; done
  config TENANT_COREDNS_IMAGE
}

pinned_versions() {
  (cd "$ROOT" && python3 -c 'from components.config.versions import KIND_NODE_IMAGES; print(*KIND_NODE_IMAGES)')
}

usage() {
  cat >&2 <<'USAGE'
usage: tools/images/build.sh TARGET [--rebuild] [--push MIRROR_HOST [--push-ca FILE]], TARGET one of
  node [--kubernetes vX.Y.Z]...
  kubeadm [--kubernetes vX.Y.Z]...   (the binary only, into the tools cache: no image, no engine)
  control-plane [--kubernetes vX.Y.Z]... [--component kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy]...
  etcd [--kubernetes vX.Y.Z]...
  coredns [--version vX.Y.Z]...
  konnectivity | local-path-provisioner | kwok | python | kamaji-etcd | kamaji-etcd-jobs
  management | all
  pause TAG | busybox
USAGE
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

target=${1:-}
shift || true
need file "apt-get install file"
if [ "$target" != kubeadm ]; then
  need docker "apt-get install docker.io"
  docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (start one: bash tools/lab/docker.sh)" >&2; exit 2; }
fi
case "$target" in
  node | kubeadm | control-plane | etcd | coredns | konnectivity | local-path-provisioner | kwok | python | kamaji-etcd | \
    kamaji-etcd-jobs | management | all | pause | busybox) ;;
  "") usage ;;
  *) echo "error: unknown target $target" >&2; usage ;;
esac
versions=()
components=()
pause_tag=""
while [ $# -gt 0 ]; do
  case "$target:$1" in
    kubeadm:--push | kubeadm:--rebuild) echo "error: kubeadm builds no image: $1 is for images" >&2; exit 2 ;;
    *:--push) PUSH=${2:-}; [ -n "$PUSH" ] || { echo "error: --push needs the mirror's host[:port]" >&2; exit 2; }; shift 2 ;;
    *:--rebuild) REBUILD=1; shift ;;
    *:--push-ca) PUSH_CA=${2:-}; [ -f "$PUSH_CA" ] || { echo "error: --push-ca needs the CA's PEM file" >&2; exit 2; }; shift 2 ;;
    node:--kubernetes | kubeadm:--kubernetes | control-plane:--kubernetes | etcd:--kubernetes)
      versions+=("${2:?--kubernetes needs a version}"); shift 2 ;;
    coredns:--version) versions+=("${2:?--version needs a CoreDNS version}"); shift 2 ;;
    control-plane:--component)
      case " ${CONTROL_PLANE_COMPONENTS[*]} " in
        *" ${2:-} "*) components+=("$2") ;;
        *) echo "error: --component ${2:-}: expected one of ${CONTROL_PLANE_COMPONENTS[*]}" >&2; exit 2 ;;
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
  kubeadm)
    # What reads kubeadm's own image lists (the tier that holds versions.KUBEADM_IMAGE_TAGS to them)
    # needs only the binary, not a node image per version.
    [ ${#versions[@]} -gt 0 ] || read -ra versions <<< "$(pinned_versions)"
    for v in "${versions[@]}"; do build_kubeadm "$v"; done
    for v in "${versions[@]}"; do static "$CACHE/kube/$v/kubeadm"; done
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
  etcd)
    [ ${#versions[@]} -gt 0 ] || read -ra versions <<< "$(pinned_versions)"
    refs=$(etcd_images "${versions[@]}")   # an assignment: a failure inside stops the build
    build_each etcd "$refs"
    ;;
  coredns)
    if [ ${#versions[@]} -gt 0 ]; then
      refs=$(printf 'registry.k8s.io/coredns/coredns:%s\n' "${versions[@]}")
    else
      read -ra versions <<< "$(pinned_versions)"
      refs=$(coredns_images "${versions[@]}")
    fi
    build_each coredns "$refs"
    ;;
  konnectivity) build_konnectivity ;;
  local-path-provisioner) build_local_path_provisioner ;;
  kwok) build_kwok ;;
  python) build_python ;;
  kamaji-etcd) kamaji_etcd_module >/dev/null; build_kamaji_etcd ;;
  kamaji-etcd-jobs) kamaji_etcd_jobs_modules; build_kamaji_etcd_jobs ;;
  management)
    # What the management node runs (the Docker tier's management cluster, and CI's): the node image
    # and kubeadm's images at the management cluster's version, and the storage provisioner.
    v=$(config MANAGEMENT_KUBERNETES_VERSION)
    etcd=$(kubeadm_image "$v" etcd)
    coredns=$(kubeadm_image "$v" coredns)
    build_node "$v"
    for c in "${CONTROL_PLANE_COMPONENTS[@]}"; do build_control_plane "$v" "$c"; done
    build_each etcd "$etcd"
    build_each coredns "$coredns"
    build_local_path_provisioner
    summary "$SECONDS"
    ;;
  all)
    read -ra versions <<< "$(pinned_versions)"
    # Every wrapper module first: one missing is refused before hours of building.
    etcd=$(etcd_images "${versions[@]}")
    coredns=$(coredns_images "${versions[@]}")
    for image in $etcd; do etcd_module "$image" >/dev/null; done
    for image in $coredns; do coredns_module "$image" >/dev/null; done
    konnectivity_module >/dev/null
    local_path_provisioner_module >/dev/null
    kamaji_etcd_module >/dev/null
    kamaji_etcd_jobs_modules
    for v in "${versions[@]}"; do build_node "$v"; done
    for v in "${versions[@]}"; do
      for c in "${CONTROL_PLANE_COMPONENTS[@]}"; do build_control_plane "$v" "$c"; done
    done
    build_each etcd "$etcd"
    build_each coredns "$coredns"
    build_konnectivity
    build_local_path_provisioner
    build_kwok
    build_python
    build_kamaji_etcd
    build_kamaji_etcd_jobs
    summary "$SECONDS"
    ;;
  *) usage ;;
esac
push
