"""Kubernetes' OpenAPI and Strimzi's CRDs as kubeconform's strict standalone JSON schemas, offline.

kubeconform downloads its schemas from GitHub by default, which this project's machines cannot reach, so
the schemas of the kinds deploy/k8s uses are generated here once and committed (regenerate.sh fetches the
sources and runs this; SOURCES.md records their versions). The layout is the one kubeconform's
`-schema-location` templates name:

- `kubernetes/{kind}{-group}-{version}.json` (`statefulset-apps-v1.json`, `configmap-v1.json`), from the
  `definitions` of Kubernetes' `api/openapi-spec/swagger.json`, every `$ref` inlined;
- `{group}/{kind}_{version}.json` (`kafka.strimzi.io/kafka_v1.json`), from each CRD's `openAPIV3Schema`.

Strict as kubeconform's `-strict` schemas are: an object that lists its properties allows no others (a
misspelt field is an error), except where a CRD keeps unknown fields. `apiVersion` and `kind` are pinned.
Descriptions are dropped: they are most of the bytes and kubeconform never shows them.

Usage: python convert.py --swagger swagger.json --crd kafka.yaml --crd ... --out DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

#: (group, version, kind) of every Kubernetes kind the manifests use; a kind missing here fails validation
#: ("could not find schema"), so adding a kind to deploy/k8s means adding it here and regenerating.
KUBERNETES_KINDS = (
    ("", "v1", "ConfigMap"),
    ("", "v1", "Namespace"),
    ("", "v1", "Service"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "StatefulSet"),
    ("batch", "v1", "Job"),
    ("autoscaling", "v2", "HorizontalPodAutoscaler"),
    ("policy", "v1", "PodDisruptionBudget"),
)
REF = "#/definitions/"
INT_OR_STRING = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
QUANTITY = {"oneOf": [{"type": "string"}, {"type": "number"}]}
DROPPED = ("description", "x-kubernetes-group-version-kind", "x-kubernetes-map-type", "x-kubernetes-unions",
           "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-patch-merge-key",
           "x-kubernetes-patch-strategy", "x-kubernetes-validations", "x-kubernetes-embedded-resource")


def strict(node: Any, definitions: dict[str, Any] | None = None, seen: tuple[str, ...] = ()) -> Any:
    """`node` as a strict JSON schema: references inlined, int-or-string and quantities as either type,
    closed objects, keys kubeconform ignores dropped."""
    if isinstance(node, list):
        return [strict(item, definitions, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node and definitions is not None:
        name = node["$ref"].removeprefix(REF)
        if name in seen:
            raise ValueError(f"recursive definition {name}: not expected among the kinds converted")
        if name == "io.k8s.apimachinery.pkg.api.resource.Quantity":
            return dict(QUANTITY)
        return strict(definitions[name], definitions, (*seen, name))
    if node.get("format") == "int-or-string" or node.pop("x-kubernetes-int-or-string", False):
        return dict(INT_OR_STRING)
    open_object = node.pop("x-kubernetes-preserve-unknown-fields", False)
    nullable = node.pop("nullable", False)
    out = {key: strict(value, definitions, seen) for key, value in node.items()
           if key not in DROPPED and key != "properties"}
    if "properties" in node:
        out["properties"] = {name: strict(value, definitions, seen) for name, value in node["properties"].items()}
        if not open_object:
            out.setdefault("additionalProperties", False)
    if nullable and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def pin(schema: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """The schema of one kind: apiVersion and kind must be exactly these, and present."""
    schema["properties"]["apiVersion"] = {"type": "string", "enum": [api_version]}
    schema["properties"]["kind"] = {"type": "string", "enum": [kind]}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind"})
    return {"$schema": "http://json-schema.org/draft-07/schema#", **schema}


def kubernetes_schemas(swagger: Path) -> dict[str, dict[str, Any]]:
    """File name -> schema for each of KUBERNETES_KINDS."""
    definitions = json.loads(swagger.read_text())["definitions"]
    by_gvk = {(gvk["group"], gvk["version"], gvk["kind"]): name for name, body in definitions.items()
              for gvk in body.get("x-kubernetes-group-version-kind", [])}
    out = {}
    for group, version, kind in KUBERNETES_KINDS:
        schema = strict(definitions[by_gvk[group, version, kind]], definitions)
        api_version = f"{group}/{version}" if group else version
        suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
        out[f"kubernetes/{kind.lower()}{suffix}.json"] = pin(schema, api_version, kind)
    return out


def crd_schemas(crd_file: Path) -> dict[str, dict[str, Any]]:
    """File name -> schema for each served version of the CRD in `crd_file`."""
    crd = yaml.safe_load(crd_file.read_text())
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    return {f"{group}/{kind.lower()}_{v['name']}.json":
            pin(strict(v["schema"]["openAPIV3Schema"]), f"{group}/{v['name']}", kind)
            for v in crd["spec"]["versions"] if v.get("served", True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swagger", type=Path, required=True, help="Kubernetes' api/openapi-spec/swagger.json")
    parser.add_argument("--crd", type=Path, action="append", default=[], help="a CustomResourceDefinition YAML")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    schemas = kubernetes_schemas(args.swagger)
    for crd in args.crd:
        schemas.update(crd_schemas(crd))
    for name, schema in sorted(schemas.items()):
        path = args.out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
