"""APO, automatic prompt optimization: beam search over prompt templates with textual gradients, through the
log (`algorithm`: the loop; `beam`: its rules; `editor`: the critique and edit calls; `prompts/`: their texts)."""

from agl_events.algorithm.apo.algorithm import APO, APOResult

__all__ = ["APO", "APOResult"]
