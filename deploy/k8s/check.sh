#!/usr/bin/env bash
# Validate Kubernetes manifests offline: each overlay rendered by kustomize (or a YAML file as it is), then
# kubeconform -strict against the committed schemas (deploy/k8s/schemas: Kubernetes and Strimzi, no unknown
# fields allowed; a kind without a schema fails). Arguments: overlay folders or manifest files; none: every
# overlay. Exit status non-zero if anything is invalid.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/tools.sh"
BIN=$HERE/../../.agl/tools/bin
[ $# -gt 0 ] || set -- "$HERE"/overlays/*/
status=0
for target in "$@"; do
  echo "== $target"
  if [ -d "$target" ]; then render=("$BIN/kustomize" build "$target"); else render=(cat "$target"); fi
  "${render[@]}" | "$BIN/kubeconform" -strict -summary -output text \
    -schema-location "$HERE/schemas/kubernetes/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
    -schema-location "$HERE/schemas/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json" \
    || status=1
done
exit $status
