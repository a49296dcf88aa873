"""The toy task's model as a Hugging Face Llama folder: what verl and vLLM load when no real model is at hand.

verl's actor (FSDP) and its vLLM servers take a model folder (`config.json`, weights, tokenizer); neither
knows our own `Policy`. A randomly initialised small Llama with our tokenizer is a real architecture for
both, made here offline (nothing to download), so the GPU check can train VERL end to end on any machine;
with a real model folder (Qwen2.5-0.5B and the like) it runs the same way.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from agl_events.policy.tokenizer import make_tokenizer


def save_tiny_llama(folder: Path, *, layers: int = 2, hidden: int = 128, heads: int = 2, seed: int = 0) -> Path:
    """Write a `layers`-layer Llama with our 15-token vocabulary and chat template to `folder`. Heads of 64
    dimensions: a size every vLLM attention backend takes."""
    tokenizer = make_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=4 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=128, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         tie_word_embeddings=False)
    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
