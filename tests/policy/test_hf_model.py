"""The tiny Llama folder loads back as a Hugging Face model and tokenizer, chat template included."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agl_events.policy.hf_model import save_tiny_llama


def test_the_tiny_llama_loads_and_generates_from_a_chat_prompt(tmp_path: Path) -> None:
    folder = save_tiny_llama(tmp_path / "tiny")
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "1 2 3 ="}], tokenize=True, return_dict=False)
    assert tokenizer.convert_ids_to_tokens(ids) == ["<s>", "1", "2", "3", "="]
    out = model.generate(torch.tensor([ids]), max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert out.shape == (1, 8) and int(out.max()) < len(tokenizer)
    assert model.config.model_type == "llama" and model.config.vocab_size == len(tokenizer) == 15
