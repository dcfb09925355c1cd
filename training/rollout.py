"""Rollouts: N ordinary cave team runs per prompt, on backends that wrap the CURRENT policy weights.

Train what you run: the team is the user's TeamSpec, run by cave's own team loop (``LocalPool``);
only its backends are swapped for the transformers backend holding the live models being trained,
so every agent call comes back with prompt ids, response ids and sampling-time logprobs. Each call
then becomes one ``Sample`` (``cave.training.samples.build_samples``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cave.llm.base import LLM, Completion, Message
from cave.llm.hf import TransformersLLM
from cave.team import LocalPool, Team, TeamResult, TeamSpec, derive_seed
from cave.trajectory import Trajectory

__all__ = [
    "BatchedPolicyLLM",
    "Episode",
    "LivePolicyLLM",
    "POLICY_KEY",
    "Rollout",
    "arollout",
    "episode_seeds",
    "pick_examples",
    "policy_team",
    "rollout",
    "trainable_trajectories",
]

POLICY_KEY = "policy_{}"  # the backend key of the live model named {} in the team built for rollouts


@dataclass
class Episode:
    """One team run of a rollout: its result, the example it solved and its prompt group."""

    result: TeamResult
    example: Mapping[str, Any]
    group_id: str
    reward: float | None = None
    reward_error: str | None = None

    @property
    def trajectory(self) -> Trajectory:
        return self.result.trajectory


@dataclass
class Rollout:
    episodes: list[Episode]
    seconds: float = 0.0
    dropped_steps: int = 0  # agent calls without token ids (e.g. a timed-out turn): not trainable
    dropped_reasons: dict[str, int] = field(default_factory=dict)  # why, counted (``trainable_trajectories``)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def generated_tokens(self) -> int:
        """Sampled tokens (a continued reply's masked tokens between its calls are prompt, not counted)."""
        return sum(_sampled(s) for e in self.episodes for s in e.trajectory.steps)


def _sampled(step: Any) -> int:
    mask = step.meta.get("response_mask")
    return int(sum(mask)) if mask else len(step.token_ids or ())


GenerationContext = Callable[[], contextlib.AbstractContextManager]


class LivePolicyLLM(TransformersLLM):
    """``TransformersLLM`` on the live policy whose every generation runs inside ``generation_context()``.

    The trainer passes its stepper's ``for_generation``: under DeepSpeed ZeRO-3 the block where the weights are
    gathered once, instead of once per decoded token by DeepSpeed's forward hooks.
    """

    def __init__(self, model: Any, tokenizer: Any, *, generation_context: GenerationContext | None = None,
                 **options: Any) -> None:  # fmt: skip
        super().__init__(model, tokenizer, **options)
        self.generation_context = generation_context or contextlib.nullcontext

    def generate_batch(self, prompts: Any, **kwargs: Any) -> Any:
        with self.generation_context():
            return super().generate_batch(prompts, **kwargs)

    def _generate(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with self.generation_context():
            yield from super()._generate(*args, **kwargs)


class BatchedPolicyLLM(LLM):
    """The live policy as a cave backend whose every call goes through one ``GenerationEngine`` (continuous batching).

    All calls in flight (every concurrent team run, every role on this model, every turn) are decoded together: a
    call joins the running batch between two decode steps and leaves it when done (``cave.llm.engine``). Each call
    still gets its own prompt ids, response ids and sampling-time logprobs, and its own seed (a seeded call samples
    what ``TransformersLLM`` samples alone with that seed, up to batching's numerical noise). Native tool calls are
    rendered with the chat template and parsed from the text, as ``TransformersLLM`` does. The engine decodes inside
    ``generation_context()`` (under DeepSpeed ZeRO-3: the weights gathered once while it is busy). ``engine_options``
    go to the ``GenerationEngine`` (``max_batch``, ``window_s``, ``max_wait_s``, ...; its defaults where not given).
    """

    name = "transformers-batched"
    supports_prefix = True  # a role's response_prefix is prompt tokens (never trained), as in TransformersLLM

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        top_k: int = 0,
        top_p: float = 1.0,
        generation_context: GenerationContext | None = None,
        **engine_options: Any,
    ) -> None:
        from cave.llm.engine import GenerationEngine

        # prompt encoding, limits, the model's name
        self.single = LivePolicyLLM(model, tokenizer, generation_context=generation_context, top_k=top_k, top_p=top_p)
        self.generation_context = self.single.generation_context
        self.model, self.tokenizer = model, tokenizer
        self.context_window = self.single.context_window
        self.supports_tools = self.single.supports_tools
        self.top_k, self.top_p = top_k, top_p
        self.engine = GenerationEngine(model, tokenizer, generation_context=self.generation_context, **engine_options)
        self.max_batch = self.engine.max_batch
        self.batches = self.engine.stats.step_rows  # rows per decode step, for metrics (the trainer clears it)

    def count_tokens(self, text: str) -> int:
        return self.single.count_tokens(text)

    async def _complete(self, messages: list[Message], **kwargs: Any) -> Completion:
        from cave.llm.decoding import reply_room
        from cave.llm.tool_calls import take_tool_calls

        prefix = str(kwargs.get("prefix") or "")
        tools = kwargs.get("tools")
        prompt_ids = self.single.encode(messages, tools, prefix)
        gen = await self.engine.generate(
            prompt_ids,
            max_new_tokens=reply_room(self, len(prompt_ids), int(kwargs.get("max_tokens") or 512)),
            temperature=float(kwargs.get("temperature") or 0.0),
            top_k=int(kwargs.get("top_k", self.top_k) or 0),
            top_p=float(kwargs.get("top_p", self.top_p)),
            seed=kwargs.get("seed"),
            stop=tuple(kwargs.get("stop") or ()),
        )
        gen.prefix = prefix  # the reply's text starts with it; its tokens stay in prompt_ids
        completion = gen.completion(self.single.model_name)
        if tools:
            take_tool_calls(completion, tools)
        return completion


def policy_team(
    spec: TeamSpec,
    role_models: Mapping[str, str],
    backends: Mapping[str, Any],
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    max_in_flight: int | None = None,
    base_dir: str | Path | None = None,
) -> Team:
    """The user's team with each role's backend replaced by the live policy backend of its model.

    ``role_models``: role -> model name; ``backends``: model name -> LLM (a TransformersLLM on the live model).
    """
    missing = [r for r in spec.role_names if r not in role_models]
    if missing:
        raise KeyError(f"roles without a policy model: {missing}; add them under agents: in the train config")
    roles = [r.model_copy(update={"backend": POLICY_KEY.format(role_models[r.name])}) for r in spec.roles]
    update: dict[str, Any] = {"roles": roles, "backends": {}}
    if temperature is not None:
        update["temperature"] = temperature
        # a role's own sampling temperature would make its logprobs differ from the trained policy's
        roles[:] = [
            r.model_copy(update={"sampling": r.sampling.model_copy(update={"temperature": None})}) for r in roles
        ]
    if max_tokens is not None:
        update["max_tokens"] = max_tokens
    if max_in_flight is None:  # a batching backend (its max_batch) wants every concurrent call at once
        batch = max((int(getattr(llm, "max_batch", 0) or 0) for llm in backends.values()), default=0)
        max_in_flight = batch if batch > spec.max_in_flight else None
    if max_in_flight is not None:
        update["max_in_flight"] = max_in_flight
    team_spec = spec.model_copy(update=update)
    instances = {POLICY_KEY.format(name): llm for name, llm in backends.items()}
    base = base_dir or (Path(spec.source).parent if spec.source else None)
    return Team(team_spec, base_dir=base, backends=instances)


def episode_seeds(seed: int, step: int, n: int) -> list[int]:
    """Distinct, reproducible seeds for the n team runs of one training step.

    >>> episode_seeds(0, 1, 2) == episode_seeds(0, 1, 2) != episode_seeds(0, 2, 2)
    True
    """
    return [int(derive_seed(seed, "rollout", step, i)) for i in range(n)]


def pick_examples(examples: Sequence[Mapping[str, Any]], step: int, batch_size: int) -> list[Mapping[str, Any]]:
    """The prompts of ``step`` (1-based): the dataset in order, cycled, ``batch_size`` at a time.

    >>> pick_examples([{"q": 1}, {"q": 2}, {"q": 3}], 2, 2)
    [{'q': 3}, {'q': 1}]
    """
    if not examples:
        raise ValueError("no examples to roll out; check data: in the train config")
    start = (step - 1) * batch_size
    return [examples[(start + i) % len(examples)] for i in range(batch_size)]


async def arollout(
    team: Team,
    examples: Sequence[Mapping[str, Any]],
    *,
    group_size: int,
    step: int,
    seed: int = 0,
    question_field: str = "question",
    max_episodes: int | None = None,
    offset: int = 0,
) -> Rollout:
    """``group_size`` team runs of each example, all through cave's LocalPool (concurrently, results in order).

    ``offset``: the index of ``examples[0]`` among the step's prompts, when a step is split among workers:
    group ids and episode seeds are then those the whole step would give.
    """
    tasks, owners = [], []
    for i, ex in enumerate(examples, offset):
        if question_field not in ex:
            raise KeyError(f"example {i} has no {question_field!r} field (fields: {list(ex)}); set data.question_field")
        for _ in range(group_size):
            tasks.append(str(ex[question_field]))
            owners.append((ex, f"s{step}-p{i}"))
    t0 = time.perf_counter()
    seeds = episode_seeds(seed, step, (offset + len(examples)) * group_size)[offset * group_size :]
    results = await LocalPool(team, max_episodes=max_episodes).arun_many(tasks, seeds=seeds)
    episodes = []
    for result, (ex, group) in zip(results, owners, strict=True):
        result.trajectory.meta["group_id"] = group
        episodes.append(Episode(result, ex, group))
    return Rollout(episodes, seconds=time.perf_counter() - t0)


def rollout(team: Team, examples: Sequence[Mapping[str, Any]], **kwargs: Any) -> Rollout:
    """Sync edge of ``arollout``."""
    return asyncio.run(arollout(team, examples, **kwargs))


def trainable_trajectories(roll: Rollout) -> list[Trajectory]:
    """The scored episodes' trajectories, without calls that have no token ids (counted in ``dropped_steps``).

    Episodes whose reward failed are left out (their samples are dropped, counted by the trainer).
    """
    out = []
    for ep in roll.episodes:
        if ep.reward is None:
            continue
        traj = ep.trajectory
        keep = [s for s in traj.steps if s.token_ids is not None and s.prompt_token_ids]
        roll.dropped_steps += len(traj.steps) - len(keep)
        for s in traj.steps:
            if s.token_ids is None or not s.prompt_token_ids:
                why = s.meta.get("untrainable") or "no token ids (the backend returned none, or the call failed)"
                roll.dropped_reasons[why] = roll.dropped_reasons.get(why, 0) + 1
        out.append(dataclasses.replace(traj, steps=keep, reward=ep.reward))
    return out
