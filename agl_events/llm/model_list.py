"""The proxy's model list: LiteLLM's `model_list` entries, read from YAML or JSON.

The same format as LiteLLM's proxy config (and upstream's LLMProxy), so an existing LiteLLM config works
as it is: a file that is a list of entries, or a mapping with a `model_list` key (other keys ignored).
`model_info` may carry our two switches, both on by default: `return_token_ids` (vLLM's extension; turn
it off for hosted APIs that refuse unknown parameters) and `logprobs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field


class ModelConfig(BaseModel):
    """One LiteLLM `model_list` entry: the name agents ask for and where LiteLLM finds it."""

    model_config = ConfigDict(extra="allow")
    model_name: str
    litellm_params: dict[str, Any]
    model_info: dict[str, Any] = Field(default_factory=dict)

    @property
    def asks_token_ids(self) -> bool:
        return bool(self.model_info.get("return_token_ids", True))

    @property
    def asks_logprobs(self) -> bool:
        return bool(self.model_info.get("logprobs", True))


def parse_model_list(data: Any) -> list[ModelConfig]:
    """Entries from a loaded config: a list, or a mapping with `model_list`."""
    entries = data.get("model_list") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise ValueError("a model list is a non-empty list of {model_name, litellm_params} entries "
                         "(or a LiteLLM config with a `model_list` key)")
    return [ModelConfig.model_validate(entry) for entry in entries]


def model_names(models: list[ModelConfig]) -> list[str]:
    """The names agents may ask for, in the list's order, each once (several deployments may share one)."""
    if not models:
        raise ValueError("the proxy needs at least one model in its model list")
    return list(dict.fromkeys(m.model_name for m in models))


def load_model_list(path: Path) -> list[ModelConfig]:
    """Read a model list file (YAML, which also reads JSON)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read the model list {path}: {exc}") from exc
    return parse_model_list(data)
