#!/usr/bin/env bash
# Builds (or reuses) the real upstream binaries the integration tier runs against, into a
# cache outside the repository keyed by version, and writes an env file to source:
#   pulumi + its Python language host and dynamic-provider launcher, the kubernetes provider
#   plugin, Helm's CLI, kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok, actionlint.
# A binary of the right version already on PATH (a user's machine) is used as it is.
# Usage: tools/build.sh [--print-env]   (cache: $GPU_TENANCY_CACHE, default ~/.cache/gpu-tenancy)
set -euo pipefail

# shellcheck source=tools/lib.sh
. "$(dirname "$0")/lib.sh"

# go_install NAME VERSION PKG: `go install PKG@vVERSION` (a module without replace directives) into
# $CACHE/NAME/VERSION once.
go_install() {
  local name=$1 version=$2 pkg=$3
  local out=$CACHE/$name/$version
  if [ ! -x "$out/$name" ]; then
    local start=$SECONDS
    log "$name $version: building ($pkg@v$version)"
    mkdir -p "$out"
    GOBIN="$out" GOFLAGS= go install -trimpath "$pkg@v$version"
    log "$name $version: built in $((SECONDS - start)) s"
  fi
  ln -sf "$out/$name" "$BIN/$name"
}

total=$SECONDS

# Pulumi CLI, its Python language host and the scripts that must sit beside them: all in one
# directory, where the engine looks for bundled plugins (next to the real pulumi binary).
if ! have pulumi "v$PULUMI_VERSION\$" version; then
  build pulumi "$PULUMI_VERSION" pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
    "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION"
  OUTDIR=pulumi build pulumi-language-python "$PULUMI_VERSION" langhost . "-X main.version=$PULUMI_VERSION"
  sdk=$(cd "$ROOT/tools/go/langhost" && go mod download github.com/pulumi/pulumi/sdk/v3 &&
    go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
  for script in cmd/pulumi-language-python-exec dist/pulumi-resource-pulumi-python; do
    install -m 0755 "$sdk/python/$script" "$CACHE/pulumi/$PULUMI_VERSION/$(basename "$script")"
  done
fi

# Kubernetes provider plugin: its main embeds JSON that upstream makes with go generate.
PRE_BUILD='go mod download github.com/pulumi/pulumi-kubernetes/provider/v4
d=$(go list -m -f "{{.Dir}}" github.com/pulumi/pulumi-kubernetes/provider/v4)/cmd/pulumi-resource-kubernetes
python3 - "$d" "$PULUMI_KUBERNETES_VERSION" <<PY
import json, sys
src, version = sys.argv[1], sys.argv[2]
schema = json.load(open(src + "/schema.json"))
schema["version"] = version
json.dump(schema, open("schema-embed.json", "w"), separators=(",", ":"))
json.dump(json.load(open(src + "/terraform-mapping.json")), open("terraform-mapping-embed.json", "w"), separators=(",", ":"))
PY' build pulumi-resource-kubernetes "$PULUMI_KUBERNETES_VERSION" kubernetes . \
  "-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$PULUMI_KUBERNETES_VERSION"

# Helm's CLI at the Helm the provider vendors, built in the provider's module so that its
# dependencies are the provider's (most packages are already compiled): the tests package charts
# and push them to an OCI registry with it, as a closed network's mirror is filled.
grep -qE "^\s+helm.sh/helm/v3 v$HELM_VERSION( |$)" "$ROOT/tools/go/kubernetes/go.mod" ||
  { log "HELM_VERSION=$HELM_VERSION is not the Helm tools/go/kubernetes/go.mod requires"; exit 1; }
have helm "^v$HELM_VERSION\b" version --short ||
  build helm "$HELM_VERSION" kubernetes helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"

# Kubernetes control plane and etcd for the test cluster.
# Each reports its version (ldflags), as kubeadm's checks and `--version` expect.
for name in kube-apiserver kube-scheduler kube-controller-manager; do
  have "$name" "v$KUBERNETES_VERSION\$" --version || build_kube "$name" "$KUBERNETES_VERSION" kube
done
have etcd "etcd Version: $ETCD_VERSION" --version || build etcd "$ETCD_VERSION" etcd .

# Simulated nodes for worker pools, and the linter of the pull-request workflow.
have kwok "$KWOK_VERSION" --version || go_install kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok
have actionlint "^$ACTIONLINT_VERSION" -version || go_install actionlint "$ACTIONLINT_VERSION" github.com/rhysd/actionlint/cmd/actionlint

# Plugins are installed into a PULUMI_HOME of our own, at the exact versions the SDKs request.
PULUMI_HOME_DIR=$CACHE/pulumi-home
if [ ! -d "$PULUMI_HOME_DIR/plugins/resource-kubernetes-v$PULUMI_KUBERNETES_VERSION" ]; then
  PULUMI_HOME=$PULUMI_HOME_DIR PULUMI_SKIP_UPDATE_CHECK=1 "$BIN/pulumi" plugin install resource kubernetes \
    "$PULUMI_KUBERNETES_VERSION" --file "$BIN/pulumi-resource-kubernetes" >/dev/null
fi

cat > "$CACHE/env.sh" <<ENV
export PATH="$BIN:\$PATH"
export PULUMI_HOME="$PULUMI_HOME_DIR"
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_IGNORE_AMBIENT_PLUGINS=true
ENV
log "all tools ready in $((SECONDS - total)) s; source $CACHE/env.sh"
if [ "${1:-}" = "--print-env" ]; then echo "$CACHE/env.sh"; fi
