"""Training samples: one per agent call, built from cave Trajectories; and their padded tensor batch.

Every LLM call a team makes becomes one Sample (Dr. MAS): the prompt that agent saw, the tokens it produced, the
log-probs at sampling time, who made it (agent id = the Step's role), which prompt group and trajectory it belongs
to, and its score = the team's episode reward minus the call's invalid-format penalty.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from cave.training.loss import format_penalized_score

from cave.trajectory import Trajectory

__all__ = ["Batch", "Sample", "build_samples", "collate", "sample_columns"]


@dataclass
class Sample:
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int] | None = None  # 1 = train on this response token; None = all ones
    old_logprobs: list[float] | None = None  # per response token at sampling time; None = recompute before update
    agent_id: str = "agent"
    group_id: Hashable = ""  # the prompt group: the N team runs of one prompt
    traj_id: str = ""  # the team run (episode)
    score: float = 0.0  # reward - format_penalty
    format_penalty: float = 0.0  # what was subtracted from the reward for this call (0 when the format was valid)
    reward: float = 0.0  # the episode reward shared by every call of the trajectory
    step_index: int = -1  # position of the call in its trajectory

    def __post_init__(self) -> None:
        where = f"sample (agent {self.agent_id!r}, trajectory {self.traj_id!r}, step {self.step_index})"
        if not self.prompt_ids:
            raise ValueError(
                f"{where}: prompt_ids is empty; a call always has a prompt (check the backend's token ids)"
            )
        if self.response_mask is None:
            self.response_mask = [1] * len(self.response_ids)
        if len(self.response_mask) != len(self.response_ids):
            raise ValueError(
                f"{where}: response_mask has {len(self.response_mask)} entries for {len(self.response_ids)} tokens"
            )
        if self.old_logprobs is not None and len(self.old_logprobs) != len(self.response_ids):
            raise ValueError(
                f"{where}: {len(self.old_logprobs)} logprobs for {len(self.response_ids)} response tokens; "
                "the backend must return one logprob per generated token"
            )
        if not math.isfinite(self.score):
            raise ValueError(f"{where}: score is {self.score}; drop samples whose reward failed")

    @property
    def n_tokens(self) -> int:
        return int(sum(self.response_mask or ()))


LOOP_CALLS = frozenset({"summary", "compaction"})  # step kinds the loop makes for itself


def build_samples(
    trajectories: Sequence[Trajectory],
    *,
    group_ids: Sequence[Hashable] | None = None,
    format_penalty: float = 0.0,
    roles: Collection[str] | None = None,
    on_missing_reward: Literal["raise", "skip"] = "raise",
    include_summaries: bool = False,
) -> list[Sample]:
    """One Sample per tokenized agent call of every trajectory.

    Calls the agent loop makes for itself, not for the task (``kind`` "summary": the last summarizing call at
    max_steps; "compaction": a context-compaction summary), are not trained on unless ``include_summaries``:
    they would carry the episode's reward for text the policy did not choose to act with.

    - group id: ``group_ids[i]`` when given, else ``traj.meta["group_id"]``, else ``traj.task`` (the N runs of one
      prompt share it);
    - trajectory id: ``traj.team_run_id`` or else ``traj.run_id``;
    - score: ``traj.reward`` minus ``format_penalty`` for a step whose ``meta["format_ok"]`` is False;
    - ``roles``: the agents being trained (default: every role with token ids); steps of other roles are ignored,
      and a step of a trained role without token ids is an error (its backend does not return them).
    """
    if group_ids is not None and len(group_ids) != len(trajectories):
        raise ValueError(f"group_ids has {len(group_ids)} entries for {len(trajectories)} trajectories")
    samples: list[Sample] = []
    for i, traj in enumerate(trajectories):
        traj_id = traj.team_run_id or traj.run_id
        if traj.reward is None or not math.isfinite(traj.reward):
            if on_missing_reward == "skip":
                continue
            raise ValueError(
                f"trajectory {traj_id!r} (task {traj.task[:60]!r}) has reward {traj.reward!r}; score it first, or "
                "pass on_missing_reward='skip' to drop unscored runs"
            )
        group = group_ids[i] if group_ids is not None else traj.meta.get("group_id", traj.task)
        trained = set(roles) if roles is not None else {s.role for s in traj.steps if s.token_ids is not None}
        for step in traj.steps:
            if step.role not in trained or (step.kind in LOOP_CALLS and not include_summaries):
                continue
            if step.token_ids is None or not step.prompt_token_ids:
                raise ValueError(
                    f"trajectory {traj_id!r} step {step.index} (role {step.role!r}) has no token ids; run the team "
                    "with a backend that returns prompt_token_ids and token_ids (e.g. the transformers backend), or "
                    "leave that role out of `roles`"
                )
            format_ok = step.meta.get("format_ok")
            penalty = format_penalty if format_ok is False else 0.0
            samples.append(
                Sample(
                    prompt_ids=list(step.prompt_token_ids),
                    response_ids=list(step.token_ids),
                    # a reply continued past max_tokens: the tokens between its calls are context, not trained
                    response_mask=list(step.meta["response_mask"]) if step.meta.get("response_mask") else None,
                    old_logprobs=list(step.logprobs) if step.logprobs is not None else None,
                    agent_id=step.role,
                    group_id=group,
                    traj_id=traj_id,
                    score=format_penalized_score(float(traj.reward), format_ok, format_penalty),
                    format_penalty=penalty,
                    reward=float(traj.reward),
                    step_index=step.index,
                )
            )
    return samples


def sample_columns(samples: Sequence[Sample]) -> dict[str, list]:
    """The per-call columns the advantage estimators take: scores, group_ids, traj_ids, agent_ids."""
    return {
        "scores": [s.score for s in samples],
        "group_ids": [s.group_id for s in samples],
        "traj_ids": [s.traj_id for s in samples],
        "agent_ids": [s.agent_id for s in samples],
    }


@dataclass
class Batch:
    """Left-padded prompts followed by right-padded responses: every response starts at column ``prompt_len``.

    The logits at columns ``prompt_len - 1 .. prompt_len + T - 2`` predict the T response positions.
    """

    input_ids: torch.Tensor  # [B, P + T] long
    attention_mask: torch.Tensor  # [B, P + T] long
    position_ids: torch.Tensor  # [B, P + T] long: 0-based from each sample's first real token
    response_mask: torch.Tensor  # [B, T] float
    old_logprobs: torch.Tensor | None  # [B, T] float, None when any sample lacks them
    prompt_len: int  # P
    meta: dict = field(default_factory=dict)

    @property
    def response_ids(self) -> torch.Tensor:
        return self.input_ids[:, self.prompt_len :]

    @property
    def n_tokens(self) -> int:
        return int(self.response_mask.sum().item())

    def to(self, device: torch.device | str) -> Batch:
        """The same batch with every tensor on ``device`` (the model's: collate builds CPU tensors)."""
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return dataclasses.replace(
            self,
            input_ids=move(self.input_ids),
            attention_mask=move(self.attention_mask),
            position_ids=move(self.position_ids),
            response_mask=move(self.response_mask),
            old_logprobs=move(self.old_logprobs),
        )


def collate(samples: Sequence[Sample], pad_token_id: int = 0) -> Batch:
    """Pad samples into one Batch.

    >>> b = collate([Sample([5, 6], [7], old_logprobs=[-0.5]), Sample([8], [9, 10], old_logprobs=[-1.0, -2.0])])
    >>> b.input_ids.tolist(), b.prompt_len, b.response_mask.tolist()
    ([[5, 6, 7, 0], [0, 8, 9, 10]], 2, [[1.0, 0.0], [1.0, 1.0]])
    >>> b.position_ids.tolist()
    [[0, 1, 2, 2], [0, 0, 1, 2]]
    """
    if not samples:
        raise ValueError("collate needs at least one sample")
    P = max(len(s.prompt_ids) for s in samples)
    T = max(len(s.response_ids) for s in samples)
    B = len(samples)
    input_ids = torch.full((B, P + T), pad_token_id, dtype=torch.long)
    attention = torch.zeros((B, P + T), dtype=torch.long)
    response_mask = torch.zeros((B, T), dtype=torch.float32)
    have_old = all(s.old_logprobs is not None for s in samples)
    old = torch.zeros((B, T), dtype=torch.float32) if have_old else None
    for i, s in enumerate(samples):
        p, t = len(s.prompt_ids), len(s.response_ids)
        input_ids[i, P - p : P] = torch.tensor(s.prompt_ids, dtype=torch.long)
        input_ids[i, P : P + t] = torch.tensor(s.response_ids, dtype=torch.long)
        attention[i, P - p : P + t] = 1
        response_mask[i, :t] = torch.tensor(s.response_mask, dtype=torch.float32)
        if old is not None:
            old[i, :t] = torch.tensor(s.old_logprobs, dtype=torch.float32)
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    return Batch(input_ids, attention, position_ids, response_mask, old, P)
