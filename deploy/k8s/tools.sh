#!/usr/bin/env bash
# Build the pinned validation tools into .agl/tools/bin (git-ignored) with the Go toolchain and the Go module
# proxy: kustomize renders the overlays, kubeconform validates them. Idempotent: a tool at its pinned version
# is not built again. The tests run this (tests/deploy/conftest.py); check.sh too.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
TOOLS=$REPO/.agl/tools
export GOBIN=$TOOLS/bin GOPATH=$TOOLS/go GOCACHE=$TOOLS/go-cache GOMODCACHE=$TOOLS/go/pkg/mod GOTOOLCHAIN=local
PINNED=(
  "kustomize sigs.k8s.io/kustomize/kustomize/v5@v5.8.1"
  "kubeconform github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0"
)
for entry in "${PINNED[@]}"; do
  read -r name module <<<"$entry"
  stamp=$GOBIN/.$name-${module##*@}
  if [ ! -x "$GOBIN/$name" ] || [ ! -e "$stamp" ]; then
    echo "building $module into $GOBIN" >&2
    go install "$module"
    touch "$stamp"
  fi
done
chmod -R u+w "$GOPATH" 2>/dev/null || true  # module files are read-only; keep `rm -rf .agl` working
