"""The validation tools (kustomize, kubeconform) at their pinned versions, built once into .agl/tools/bin by
deploy/k8s/tools.sh (about 45 s with the Go module proxy on a fresh clone; nothing after that), and each
overlay rendered by them."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from agl_events.proc.locks import file_lock

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = sorted(path.name for path in (K8S / "overlays").iterdir() if path.is_dir())


@pytest.fixture(scope="session")
def tools() -> Path:
    (REPO / ".agl").mkdir(exist_ok=True)
    with file_lock(REPO / ".agl" / "tools.lock"):  # pytest workers share one build
        subprocess.run([K8S / "tools.sh"], check=True, timeout=600)
    return REPO / ".agl" / "tools" / "bin"


@pytest.fixture(scope="session")
def rendered(tools: Path) -> dict[str, list[dict[str, Any]]]:
    """Overlay name -> its resources, as `kustomize build` renders them."""
    def build(overlay: str) -> list[dict[str, Any]]:
        done = subprocess.run([tools / "kustomize", "build", K8S / "overlays" / overlay], capture_output=True,
                              text=True, check=True, timeout=60)
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]

    return {overlay: build(overlay) for overlay in OVERLAYS}
