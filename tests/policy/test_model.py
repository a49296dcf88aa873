"""Sampling and training agree: the logprobs a sample reports are the ones `sequence_logprobs` recomputes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agl_events.policy.model import Policy, PolicyConfig
from agl_events.policy.tokenizer import VOCAB
from agl_events.policy.weights import (
    load_optimizer,
    load_weights,
    optimizer_path,
    save_optimizer,
    save_weights,
    weights_path,
)

EOS = 2


def test_sampled_logprobs_match_sequence_logprobs() -> None:
    policy = Policy(PolicyConfig(vocab_size=len(VOCAB)))
    prompts = [[1, 5, 6, 7, 14], [1, 9, 14], [1, 4, 4, 4, 4, 4, 14]]
    for temperature in (1.0, 0.7):
        generator = torch.Generator().manual_seed(3)
        sampled = [policy.sample(p, 6, temperature=temperature, eos_id=EOS, generator=generator) for p in prompts]
        responses = [ids for ids, _, _ in sampled]
        assert {len(r) for r in responses} != {0}
        logprobs, mask, _ = policy.sequence_logprobs(prompts, responses, temperature=temperature)
        for row, (ids, reported, _) in enumerate(sampled):
            assert mask[row].sum() == len(ids)
            assert logprobs[row, : len(ids)].tolist() == pytest.approx(reported, abs=1e-5)


def test_sampling_is_seeded_stops_after_eos_and_greedy_is_the_argmax() -> None:
    policy = Policy(PolicyConfig(vocab_size=len(VOCAB)))
    draw = [policy.sample([1, 5, 14], 8, eos_id=EOS, generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert draw[0] == draw[1]
    ids = draw[0][0]
    assert EOS not in ids[:-1] and (ids[-1] == EOS or len(ids) == 8)
    greedy, _, tops = policy.sample([1, 5, 14], 4, temperature=0, eos_id=EOS, top=3)
    assert [row[0][0] for row in tops] == greedy and all(len(row) == 3 for row in tops)


def test_weights_round_trip_through_a_file_uri(tmp_path: Path) -> None:
    policy = Policy(PolicyConfig(vocab_size=len(VOCAB), seed=5))
    uri = save_weights(policy, weights_path(tmp_path, "exp", 1))
    assert uri.startswith("file://") and uri.endswith("/policy/exp/v1.pt")
    assert list((tmp_path / "policy" / "exp").iterdir()) == [tmp_path / "policy" / "exp" / "v1.pt"]
    loaded = load_weights(uri)
    ids = torch.tensor([[1, 5, 6, 14]])
    assert torch.equal(loaded(ids), policy(ids))
    with pytest.raises(ValueError, match="file://"):
        load_weights("s3://bucket/v1.pt")


def test_optimizer_state_is_restored_only_for_its_own_version(tmp_path: Path) -> None:
    policy = Policy(PolicyConfig(vocab_size=len(VOCAB), seed=5))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    policy(torch.tensor([[1, 5, 6]])).sum().backward()
    optimizer.step()  # Adam now holds moments and a step count
    path = optimizer_path(tmp_path, "exp", 2)
    assert path.name == "v2.optimizer.pt"
    assert not load_optimizer(torch.optim.Adam(policy.parameters()), 2, path)  # nothing saved yet
    save_optimizer(optimizer, 2, path)
    restored = torch.optim.Adam(policy.parameters(), lr=1e-3)
    assert not load_optimizer(restored, 3, path)  # saved with another version: left fresh
    assert restored.state_dict()["state"] == {}
    assert load_optimizer(restored, 2, path)
    theirs, ours = optimizer.state_dict()["state"], restored.state_dict()["state"]
    assert theirs.keys() == ours.keys() and all(torch.equal(theirs[k]["exp_avg"], ours[k]["exp_avg"]) for k in theirs)


def test_token_entropy_is_that_of_each_tokens_distribution_and_falls_as_the_temperature_does() -> None:
    policy = Policy(PolicyConfig(vocab_size=len(VOCAB)))
    prompts, responses = [[1, 5, 6, 14], [1, 9, 14]], [[7, 2], [3]]
    hot, cold = (policy.sequence_logprobs(prompts, responses, temperature=t) for t in (1.0, 0.2))
    logits = policy(torch.tensor([[1, 5, 6, 14]]))[0, 3]  # the distribution the first response token is drawn from
    assert float(hot.entropy[0, 0]) == pytest.approx(float(torch.distributions.Categorical(logits=logits).entropy()),
                                                     abs=1e-5)
    assert float(hot.entropy[1, 1]) == 0.0  # padding
    assert (cold.entropy[hot.mask.bool()] < hot.entropy[hot.mask.bool()]).all()
