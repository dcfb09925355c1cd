"""Samples from cave Trajectories, and their padded batch."""

import pytest
import torch
from cave.training.advantages import compute_advantages
from cave.training.samples import Sample, build_samples, collate, sample_columns

from cave.trajectory import Step, Trajectory


def _step(i, role, prompt, tokens, ok=None):
    meta = {} if ok is None else {"format_ok": ok}
    return Step(
        index=i,
        role=role,
        prompt_token_ids=prompt,
        token_ids=tokens,
        logprobs=[-0.5] * len(tokens),
        meta=meta,
    )


def _team_run(run, reward, task="2+2?", group=None):
    steps = [
        _step(0, "solver", [1, 2], [3, 4]),
        _step(1, "verifier", [1, 2, 3, 4], [5], ok=False),
        _step(2, "solver", [1, 2, 3, 4, 5], [6, 7, 8], ok=True),
    ]
    meta = {"group_id": group} if group else {}
    return Trajectory(run_id=f"r{run}", team_run_id=f"team{run}", task=task, steps=steps, reward=reward, meta=meta)


def test_build_samples_from_team_trajectories():
    samples = build_samples([_team_run(0, 1.0), _team_run(1, 0.0)], format_penalty=0.1)
    assert len(samples) == 6
    s0, v0, s1 = samples[:3]
    assert (s0.agent_id, v0.agent_id, s1.agent_id) == ("solver", "verifier", "solver")
    assert s0.prompt_ids == [1, 2] and s0.response_ids == [3, 4] and s0.response_mask == [1, 1]
    assert s0.old_logprobs == [-0.5, -0.5]
    assert s0.traj_id == "team0" and s0.group_id == "2+2?" and s0.step_index == 0
    assert s0.score == 1.0 and s0.format_penalty == 0.0 and s0.reward == 1.0
    assert v0.score == pytest.approx(0.9) and v0.format_penalty == 0.1  # meta["format_ok"] is False
    assert s1.score == 1.0  # format_ok True: no penalty
    assert samples[4].score == pytest.approx(-0.1)  # the second run's verifier: R = 0 minus c
    assert s1.n_tokens == 3


def test_group_ids_from_argument_meta_or_task():
    trajs = [_team_run(0, 1.0, group="g7"), _team_run(1, 0.0, task="other")]
    samples = build_samples(trajs)
    assert {s.group_id for s in samples} == {"g7", "other"}
    samples = build_samples(trajs, group_ids=["a", "a"])
    assert {s.group_id for s in samples} == {"a"}
    with pytest.raises(ValueError, match="group_ids has 1 entries for 2 trajectories"):
        build_samples(trajs, group_ids=["a"])


def test_roles_filter_and_missing_tokens():
    traj = _team_run(0, 1.0)
    traj.steps.append(Step(index=3, role="router", completion="route to solver"))  # no token ids
    # Default: only roles with token ids are trained, so the router's untokenized step is left out.
    assert [s.agent_id for s in build_samples([traj])] == ["solver", "verifier", "solver"]
    assert [s.agent_id for s in build_samples([traj], roles=["verifier"])] == ["verifier"]
    with pytest.raises(ValueError, match="step 3 \\(role 'router'\\) has no token ids"):
        build_samples([traj], roles=["solver", "router"])


def test_missing_reward_raises_or_skips():
    trajs = [_team_run(0, None), _team_run(1, 1.0)]
    with pytest.raises(ValueError, match="has reward None; score it first"):
        build_samples(trajs)
    assert {s.traj_id for s in build_samples(trajs, on_missing_reward="skip")} == {"team1"}


def test_sample_validation():
    with pytest.raises(ValueError, match="2 logprobs for 1 response tokens"):
        Sample([1], [2], old_logprobs=[-1.0, -1.0])
    with pytest.raises(ValueError, match="prompt_ids is empty"):
        Sample([], [2])
    with pytest.raises(ValueError, match="response_mask has 1 entries for 2 tokens"):
        Sample([1], [2, 3], response_mask=[1])


def test_columns_feed_the_estimators():
    samples = build_samples([_team_run(0, 1.0, group="g"), _team_run(1, 0.0, group="g")], format_penalty=0.1)
    adv = compute_advantages("drmas", **sample_columns(samples))
    # Solver calls: scores [1, 1, 0, 0] -> +-0.866; verifier: [0.9, -0.1] -> +-0.707.
    assert adv.round(3).tolist() == [0.866, 0.707, 0.866, -0.866, -0.707, -0.866]


def test_collate_layout():
    b = collate(
        [
            Sample([5, 6, 7], [8], old_logprobs=[-1.0]),
            Sample([9], [10, 11, 12], response_mask=[1, 0, 1], old_logprobs=[-1.0, -2.0, -3.0]),
        ],
        pad_token_id=0,
    )
    assert b.prompt_len == 3
    assert b.input_ids.tolist() == [[5, 6, 7, 8, 0, 0], [0, 0, 9, 10, 11, 12]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]]
    assert b.position_ids.tolist()[1] == [0, 0, 0, 1, 2, 3]
    assert b.response_ids.tolist() == [[8, 0, 0], [10, 11, 12]]
    assert b.response_mask.tolist() == [[1, 0, 0], [1, 0, 1]]
    assert torch.equal(b.old_logprobs, torch.tensor([[-1.0, 0, 0], [-1.0, -2.0, -3.0]]))
    assert b.n_tokens == 3
    assert collate([Sample([1], [2]), Sample([1], [2], old_logprobs=[-1.0])]).old_logprobs is None


def test_the_loops_own_summaries_are_not_trained_on_by_default():
    traj = _team_run(0, 1.0)
    summary = _step(3, "solver", [1, 2, 3], [9, 9])
    summary.kind = "summary"  # the max-steps summarizing call
    compaction = _step(4, "solver", [1], [7])
    compaction.kind = "compaction"
    traj.steps += [summary, compaction]
    assert [s.step_index for s in build_samples([traj])] == [0, 1, 2]
    assert [s.step_index for s in build_samples([traj], include_summaries=True)] == [0, 1, 2, 3, 4]


def test_a_reply_continued_past_max_tokens_trains_as_one_masked_response():
    """Issue 39: the calls of a continued reply join into one sample; the tokens between them are masked."""
    from cave.training.rollout import Episode, Rollout, trainable_trajectories

    from cave.generation import Generation
    from cave.llm.base import Completion, Usage

    cut = Completion(
        "```python\nx = [1,", Usage(3, 2, 5), "length", [11, 12], [-0.5, -0.25], prompt_token_ids=[1, 2, 3]
    )
    rest = Completion(" 2]\n```", Usage(8, 1, 9), "stop", [13], [-0.125], prompt_token_ids=[1, 2, 3, 11, 12, 7, 8, 9])
    steps = []
    for i, completions in enumerate(
        [[cut, rest], [cut, Completion("y", Usage(), "stop", [5], [-1.0], prompt_token_ids=[1, 9])]]
    ):
        step = Step(index=i, role="solver")
        Generation(completions=completions).fill(step, 0.0)
        steps.append(step)
    assert steps[0].meta["continuations"] == 1 and steps[0].prompt_token_ids == [1, 2, 3]
    assert steps[0].token_ids == [11, 12, 7, 8, 9, 13] and steps[0].meta["response_mask"] == [1, 1, 0, 0, 0, 1]
    assert steps[1].token_ids is None and "re-tokenized" in steps[1].meta["untrainable"]
    traj = Trajectory(task="t", steps=steps, reward=1.0)
    roll = Rollout([Episode(result=type("R", (), {"trajectory": traj})(), example={}, group_id="g", reward=1.0)])
    [sample] = build_samples(trainable_trajectories(roll))
    assert roll.dropped_steps == 1 and list(roll.dropped_reasons.values()) == [1]  # counted, with its reason
    assert sample.response_mask == [1, 1, 0, 0, 0, 1] and sample.old_logprobs == [-0.5, -0.25, 0, 0, 0, -0.125]
    assert roll.generated_tokens == 3  # sampled tokens only
    batch = collate([sample])  # what the loss sees: the masked tokens are context only
    assert batch.response_mask.tolist() == [[1.0, 1.0, 0.0, 0.0, 0.0, 1.0]]
