#!/usr/bin/env bash
# Regenerate the JSON schemas kubeconform validates deploy/k8s against (see SOURCES.md): Kubernetes' OpenAPI
# from the k8s.io/kubernetes Go module, Strimzi's CRDs generated from its API classes on Maven Central, both
# converted by convert.py. Needs network (Go module proxy, Maven Central), Go, Maven and a Java 21+ JDK
# (Strimzi 1.x's generator is built for Java 21; set JAVA21 or have one under /usr/lib/jvm). The tests never
# run this: they use the committed schemas.
set -euo pipefail
cd "$(dirname "$0")"
KUBERNETES_VERSION=v1.34.4
REPO=$(git rev-parse --show-toplevel)
WORK=$(mktemp -d)
trap 'chmod -R u+w "$WORK"; rm -rf "$WORK"' EXIT

JAVA21=${JAVA21:-$(for j in ${JAVA_HOME:-} /usr/lib/jvm/*; do
  [ -x "$j/bin/java" ] && "$j/bin/java" -version 2>&1 | grep -qE 'version "(2[1-9]|[3-9][0-9])' && echo "$j/bin/java" && break
done)}
[ -n "$JAVA21" ] || { echo "a Java 21+ JDK is needed for Strimzi's CRD generator (set JAVA21=/path/to/java)"; exit 1; }

echo "Kubernetes $KUBERNETES_VERSION OpenAPI (Go module k8s.io/kubernetes)"
SPEC=$(GOMODCACHE="$WORK/mod" GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" \
  | "$REPO/.venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')/api/openapi-spec/swagger.json

echo "Strimzi CRDs (io.strimzi:api and crd-generator, Maven Central)"
mvn -q -B -f pom.xml dependency:build-classpath -Dmdep.outputFile="$WORK/classpath"
"$JAVA21" -cp "$(cat "$WORK/classpath")" io.strimzi.crdgenerator.CrdGenerator \
  --target-kube 1.16+ --crd-api-version v1 --api-versions v1 --storage-version v1 --yaml \
  "io.strimzi.api.kafka.model.kafka.Kafka=$WORK/kafka.yaml" \
  "io.strimzi.api.kafka.model.nodepool.KafkaNodePool=$WORK/kafkanodepool.yaml" \
  "io.strimzi.api.kafka.model.topic.KafkaTopic=$WORK/kafkatopic.yaml"

rm -rf kubernetes kafka.strimzi.io
"$REPO/.venv/bin/python" convert.py --swagger "$SPEC" --out . \
  --crd "$WORK/kafka.yaml" --crd "$WORK/kafkanodepool.yaml" --crd "$WORK/kafkatopic.yaml"
