"""Settings shared by every command: where the broker is, which experiment, where local data lives.

Kept in one place so the CLI, the store and the tests resolve the same defaults the same way
(flags win over environment variables, which win over defaults).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, field_validator

#: This package's folder. An installed package (a wheel) carries its data files under it.
PACKAGE_DIR = Path(__file__).resolve().parent
#: The source checkout the package runs from (`pip install -e .`, which `make` does, or PYTHONPATH);
#: None when it is installed from a wheel (`pip install .`), where there is no repository.
PROJECT_ROOT: Path | None = PACKAGE_DIR.parent if (PACKAGE_DIR.parent / "pyproject.toml").is_file() else None


def data_dir(in_package: str, in_checkout: str) -> Path:
    """A folder of the project's data files: `in_checkout` in a source checkout, else the packaged copy.

    The repository keeps the schemas and the broker's Maven project at the top (`schemas/`, `deploy/kafka/`);
    pyproject.toml maps each into the wheel as a subpackage named `in_package`. A checkout reads the
    originals, so an edit takes effect without reinstalling.
    """
    return PROJECT_ROOT / in_checkout if PROJECT_ROOT is not None else PACKAGE_DIR / in_package


def default_home() -> Path:
    """Where local data (the broker's files, views) lives when AGL_HOME is not set.

    A checkout keeps it in `<repo>/.agl`, next to the code, as the README and the Makefile expect. An
    installed package has no repository, so it uses `~/.agl`: one home per user, matching the one local
    broker a user runs on the default port, wherever the command is started from (a per-directory
    `./.agl` would start a second broker, which then fails on the taken port).
    """
    return PROJECT_ROOT / ".agl" if PROJECT_ROOT is not None else Path.home() / ".agl"

_EXPERIMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


class Settings(BaseModel):
    """Resolved settings. `bootstrap=None` means "use (and start if needed) the local broker"."""

    bootstrap: str | None = Field(default=None, description="Kafka bootstrap servers; None = local broker")
    experiment: str = "default"
    schema_registry_url: str | None = None
    home: Path = Field(default_factory=default_home)
    local_port: int = 9092
    local_controller_port: int = 9093
    #: Seconds a command waits for a configured cluster to answer before it says it cannot reach it.
    kafka_timeout: float = Field(default=10.0, gt=0)
    #: The store server's bearer token: the one it asks for, or the one its clients send (runners, the LLM
    #: proxy, CLI commands). A SecretStr, so printing settings never shows it.
    auth_token: SecretStr | None = None

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

    @property
    def store_token(self) -> str | None:
        return None if self.auth_token is None else self.auth_token.get_secret_value()

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Build settings from `AGL_*` environment variables; explicit non-None overrides win."""
        env: dict[str, object] = {
            "bootstrap": os.environ.get("AGL_KAFKA_BOOTSTRAP") or None,
            "experiment": os.environ.get("AGL_EXPERIMENT") or "default",
            "schema_registry_url": os.environ.get("AGL_SCHEMA_REGISTRY_URL") or None,
            "auth_token": os.environ.get("AGL_AUTH_TOKEN") or None,
        }
        if home := os.environ.get("AGL_HOME"):
            env["home"] = Path(home)
        if port := os.environ.get("AGL_KAFKA_PORT"):
            env["local_port"] = int(port)
        if port := os.environ.get("AGL_KAFKA_CONTROLLER_PORT"):
            env["local_controller_port"] = int(port)
        if timeout := os.environ.get("AGL_KAFKA_TIMEOUT"):
            env["kafka_timeout"] = timeout
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(env)
