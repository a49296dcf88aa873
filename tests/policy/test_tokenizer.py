"""The policy's tokenizer behaves as a Hugging Face model's: chat template, round trip, save and load."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer

from agl_events.policy.tokenizer import VOCAB, make_tokenizer


def test_text_round_trips_and_the_chat_template_starts_with_bos() -> None:
    tokenizer = make_tokenizer()
    ids = tokenizer("1 2 3 =", add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == "1 2 3 =" and len(tokenizer) == len(VOCAB)
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "1 2 3 ="}], add_generation_prompt=True,
                                             tokenize=True, return_dict=True)
    assert rendered["input_ids"] == [tokenizer.bos_token_id, *ids]
    answer = [*tokenizer("3 2 1", add_special_tokens=False).input_ids, tokenizer.eos_token_id]
    assert tokenizer.decode(answer, skip_special_tokens=True) == "3 2 1"


def test_saves_and_loads_offline(tmp_path: Path) -> None:
    make_tokenizer().save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded("3 2 1 =", add_special_tokens=False).input_ids == make_tokenizer()("3 2 1 =").input_ids
    assert loaded.chat_template == make_tokenizer().chat_template
