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
from cave.llm.hf import TransformersLLM, generate_batch
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
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def generated_tokens(self) -> int:
        return sum(len(s.token_ids or ()) for e in self.episodes for s in e.trajectory.steps)


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
    """The live policy as a cave backend that batches the calls of concurrent team runs into one forward.

    Calls that arrive while the model is busy (or within ``window_s`` of each other, for at most ``max_wait_s``)
    and ask for the same sampling settings are sampled together by ``cave.llm.hf.generate_batch`` (left-padded, KV cache): on a
    CPU the decode steps cost about the same for 1 or 8 rows. Each call still gets its own prompt ids,
    response ids and sampling-time logprobs. A batch uses the seed of its first call, so a run is
    reproducible given the same batches (not call by call, as with TransformersLLM). Each batch is sampled inside
    ``generation_context()`` (under DeepSpeed ZeRO-3: with the weights gathered once for the batch).
    """

    name = "transformers-batched"
    supports_prefix = True  # a role's response_prefix is prompt tokens (never trained), as in TransformersLLM

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        window_s: float = 0.05,
        max_wait_s: float = 1.0,
        max_batch: int = 64,
        generation_context: GenerationContext | None = None,
    ) -> None:
        # prompt encoding, tool calls, limits
        self.single = LivePolicyLLM(model, tokenizer, generation_context=generation_context)
        self.generation_context = self.single.generation_context
        self.model, self.tokenizer = model, tokenizer
        self.context_window = self.single.context_window
        self.window_s, self.max_wait_s, self.max_batch = window_s, max_wait_s, max_batch
        self.batches: list[int] = []  # sizes of the batches run, for metrics
        self._pending: list[tuple[tuple, list[int], int | None, asyncio.Future, str]] = []
        self._worker: asyncio.Task | None = None

    def count_tokens(self, text: str) -> int:
        return self.single.count_tokens(text)

    async def _complete(self, messages: list[Message], **kwargs: Any) -> Completion:
        if kwargs.get("tools"):  # native tool calls: the single-call backend parses them
            return await self.single.complete(messages, **kwargs)
        prefix = str(kwargs.get("prefix") or "")
        prompt_ids = self.single.encode(messages, prefix=prefix)
        room = self.context_window - len(prompt_ids)
        if room <= 0:
            return await self.single.complete(messages, **kwargs)  # raises the backend's own clear error
        key = (
            min(int(kwargs.get("max_tokens") or 512), room),
            float(kwargs.get("temperature") or 0.0),
            tuple(kwargs.get("stop") or ()),
        )
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending.append((key, prompt_ids, kwargs.get("seed"), future, prefix))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        gen = await future
        gen.prefix = prefix  # the reply's text starts with it; its tokens stay in prompt_ids
        return gen.completion(self.single.model_name)

    def _generate(self, prompts: list[list[int]], **kwargs: Any) -> Any:
        with self.generation_context():
            return generate_batch(self.model, self.tokenizer, prompts, **kwargs)

    async def _drain(self) -> None:
        # let the other team runs' calls of this turn arrive: wait while they keep coming (runs start a few ms
        # apart: each builds its runtime and prompt first), at most max_wait_s
        waited, seen = 0.0, -1
        while len(self._pending) != seen and len(self._pending) < self.max_batch and waited < self.max_wait_s:
            seen = len(self._pending)
            await asyncio.sleep(self.window_s)
            waited += self.window_s
        while self._pending:
            key = self._pending[0][0]
            batch = [p for p in self._pending if p[0] == key][: self.max_batch]
            self._pending = [p for p in self._pending if all(p is not b for b in batch)]
            max_tokens, temperature, stop = key
            self.batches.append(len(batch))
            try:
                gens = await asyncio.to_thread(
                    self._generate,
                    [b[1] for b in batch],
                    max_new_tokens=max_tokens,
                    temperature=temperature,
                    seed=batch[0][2],
                    stop=list(stop),
                )
            except Exception as e:
                for *_, fut, _prefix in batch:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            for (*_, fut, _prefix), gen in zip(batch, gens, strict=True):
                if not fut.done():  # the caller may have been cancelled (a timeout)
                    fut.set_result(gen)
            await asyncio.sleep(0)  # let the finished runs issue their next calls before looking again


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
    if max_in_flight is not None:  # a batching backend wants every concurrent call at once
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
        out.append(dataclasses.replace(traj, steps=keep, reward=ep.reward))
    return out
