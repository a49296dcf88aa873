"""A tiny torch policy served like a real model: our own tokenizer, a small transformer, versioned weights
files, and an OpenAI-compatible server in vLLM's format, so GRPO runs end to end on CPUs.

Everything here imports torch: only algorithms that train (agl_events.algorithm.grpo) import it, never the core.
"""
