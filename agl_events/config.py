"""Settings shared by every command: where the broker is, which experiment, where local data lives.

Kept in one place so the CLI, the store and the tests resolve the same defaults the same way
(flags win over environment variables, which win over defaults).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

#: The repository root when installed in development mode (`pip install -e .`), which `make` does.
PROJECT_ROOT = Path(__file__).resolve().parents[1]

_EXPERIMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


class Settings(BaseModel):
    """Resolved settings. `bootstrap=None` means "use (and start if needed) the local broker"."""

    bootstrap: str | None = Field(default=None, description="Kafka bootstrap servers; None = local broker")
    experiment: str = "default"
    schema_registry_url: str | None = None
    home: Path = Field(default_factory=lambda: PROJECT_ROOT / ".agl")
    local_port: int = 9092
    local_controller_port: int = 9093

    @field_validator("experiment")
    @classmethod
    def _valid_experiment(cls, value: str) -> str:
        # Experiment names become parts of topic names, so they must be legal there.
        if not _EXPERIMENT_RE.match(value):
            raise ValueError(
                f"experiment name {value!r} must start with a letter or digit and contain only "
                "letters, digits, '_' and '-' (at most 100 characters)"
            )
        return value

    @property
    def uses_local_broker(self) -> bool:
        return self.bootstrap is None

    @property
    def bootstrap_servers(self) -> str:
        """The servers clients connect to: the configured cluster, or the local broker."""
        return self.bootstrap or f"localhost:{self.local_port}"

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Build settings from `AGL_*` environment variables; explicit non-None overrides win."""
        env: dict[str, object] = {
            "bootstrap": os.environ.get("AGL_KAFKA_BOOTSTRAP") or None,
            "experiment": os.environ.get("AGL_EXPERIMENT") or "default",
            "schema_registry_url": os.environ.get("AGL_SCHEMA_REGISTRY_URL") or None,
        }
        if home := os.environ.get("AGL_HOME"):
            env["home"] = Path(home)
        if port := os.environ.get("AGL_KAFKA_PORT"):
            env["local_port"] = int(port)
        if port := os.environ.get("AGL_KAFKA_CONTROLLER_PORT"):
            env["local_controller_port"] = int(port)
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(env)
