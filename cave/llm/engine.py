"""One generation engine per model: every call in flight is decoded in the same batch (continuous batching).

Agents of many concurrent team runs (every role that shares the model, every sample of a prompt group, every turn)
call the model one reply at a time. ``GenerationEngine`` queues those calls and decodes them together on one worker
thread: a call that arrives while others are decoding is prefilled and joins the running batch before the next
decode step, and a call that finished (end-of-turn token, stop string, ``max_new_tokens``) leaves it at once, its
result handed back while the others go on. The callers (the agent loop, the runtime cells) only await their call.

How the batch is kept: one left-padded KV cache (a transformers ``DynamicCache`` whose layers are buffers with room on
the right, written in place at each decode step: ``cave.llm.batch_cache``) for all running rows, an attention mask
and each row's next position; a half-precision model decoding on a CPU runs its attention in float32
(``cave.llm.cpu_attention``). New rows are prefilled together (identical prompts once: a group's N samples
share the prompt, and a prompt prefilled earlier in the same busy period is reused, so samples that arrive a few ms
apart still share one prefill; a start many prompts share, such as a role's system prompt, is run once and its KV
reused, so a new prompt runs only the tokens after it), padded on the left to the running width and appended;
finished rows are dropped from the cache, and the columns that only padded rows that left are cut. Models whose cache is not a plain
``DynamicLayer`` per layer (sliding windows, linear attention) still batch, but new calls wait for the running batch
to finish.

Each call keeps its own sampling settings, seed (a ``torch.Generator`` per call: a seeded call samples what
``cave.llm.hf.generate_batch`` samples alone with that seed, up to batching's numerical noise), prompt ids, response
ids and the log-probabilities they were sampled with (the conventions of ``cave.llm.hf``).

    engine = GenerationEngine(model, tokenizer)
    gen = await engine.generate(prompt_ids, max_new_tokens=64, temperature=1.0, seed=7)
    gens = engine.generate_many([ids_a, ids_b], max_new_tokens=64, temperature=0)   # sync edge

The worker thread runs only while calls are in flight and exits when idle (nothing decodes during a trainer's
update); the prompt cache lives only while it runs, so new weights are never served stale states.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cave.llm.base import LLMError
from cave.llm.batch_cache import SLACK, fill_from_end, release_free_heap, slack_cache, stack_right
from cave.llm.cpu_attention import decode_kv_dtype, float32_attention
from cave.llm.decoding import stop_position
from cave.llm.hf import Generation, _filter_logits, _inference, cache_kwarg, cache_of, stop_token_ids
from cave.llm.prefixes import PrefixCache, evict

__all__ = ["EngineStats", "GenerationEngine"]

TRIM_EVERY = 256  # decode steps between giving the heap's free pages back (cave.llm.batch_cache.release_free_heap)


@dataclass
class _Call:
    prompt_ids: list[int]
    max_new_tokens: int
    temperature: float
    top_k: int
    top_p: float
    seed: int | None
    stop: tuple[str, ...]
    future: concurrent.futures.Future
    gen: Generation = None  # type: ignore[assignment]
    generator: Any = None

    def __post_init__(self) -> None:
        self.gen = Generation(prompt_ids=list(self.prompt_ids))

    @property
    def sampling(self) -> tuple[float, int, float]:
        return (self.temperature, self.top_k, self.top_p)


@dataclass
class EngineStats:
    """What the engine did, for metrics: rows per decode step, calls per prefill, calls that joined a running batch."""

    step_rows: list[int] = field(default_factory=list)
    prefill_calls: list[int] = field(default_factory=list)
    prefilled_prompts: int = 0  # distinct prompts actually run through a prefill (the others reused one)
    prefill_tokens: int = 0  # prompt tokens run through the model
    prefix_tokens: int = 0  # prompt tokens whose KV came from a kept prefix instead (not run again)
    joined: int = 0  # calls admitted while other calls were decoding
    calls: int = 0

    def clear(self) -> None:
        self.step_rows.clear()
        self.prefill_calls.clear()
        self.prefilled_prompts = self.joined = self.calls = self.prefill_tokens = self.prefix_tokens = 0


class GenerationEngine:
    """Continuous batching of every call in flight on one HF causal LM (see the module docstring).

    ``max_batch``: the most rows decoded at once (later calls wait in the queue). ``window_s`` / ``max_wait_s``: when
    the engine is idle and a call arrives, it waits while more calls keep arriving (``window_s`` between looks, at most
    ``max_wait_s``), so the first calls of concurrent runs are prefilled together. ``prompt_cache_tokens``: how many
    prompt tokens' KV states are kept for reuse while busy (the newest prompts); ``prefix_cache_tokens``: how many
    tokens of shared prompt starts (the least recently used dropped first; 0: none, every prompt runs whole).
    ``kv_slack``: spare positions in the running batch's KV buffers, so that a decode step writes in place instead of
    reallocating every layer (``cave.llm.batch_cache``; 0: reallocated every token, as transformers' DynamicLayer).
    ``kv_spare_rows``: spare rows in those buffers, so that a call joins into one and a row that leaves is filled by
    the last (one row copied) instead of the whole batch being copied (False: copied, as before; less memory).
    ``generation_context``: a callable giving the context manager the worker decodes in (the trainer's ``for_generation``: under DeepSpeed ZeRO-3 the
    weights are gathered once for the busy period).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch: int = 128,
        window_s: float = 0.05,
        max_wait_s: float = 1.0,
        generation_context: Callable[[], contextlib.AbstractContextManager] | None = None,
        stop_ids: set[int] | None = None,
        prompt_cache_tokens: int = 16384,
        prefix_cache_tokens: int = 8192,
        kv_slack: int = SLACK,
        kv_spare_rows: bool = True,
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.stop_ids = set(stop_ids) if stop_ids is not None else stop_token_ids(tokenizer, model)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad = pad if pad is not None else (min(self.stop_ids) if self.stop_ids else 0)
        self.max_batch, self.window_s, self.max_wait_s = max_batch, window_s, max_wait_s
        self.generation_context = generation_context or contextlib.nullcontext
        self.prompt_cache_tokens, self.prefix_cache_tokens = prompt_cache_tokens, prefix_cache_tokens
        self.kv_slack, self.kv_spare_rows = kv_slack, kv_spare_rows
        self.kv_dtype = decode_kv_dtype(model)  # float32 for a half-precision model on a CPU (cave.llm.cpu_attention)
        self.stats = EngineStats()
        self._lock = threading.Lock()
        self._pending: list[_Call] = []
        self._running = False
        self._cache_kw = cache_kwarg(model)
        self.continuous = _plain_model(model)  # False: batches of calls run one after the other (no joining)

    # -- the callers' side -------------------------------------------------------------------------------------------
    def submit_many(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int | None | Sequence[int | None] = None,
        stop: Sequence[str] = (),
    ) -> list[concurrent.futures.Future]:
        """Queue calls (admitted together); each future gives its ``Generation``. ``seed``: one, or one per prompt."""
        seeds = list(seed) if isinstance(seed, list | tuple) else [seed] * len(prompts)
        calls = []
        for p, s in zip(prompts, seeds, strict=True):
            if not p:
                raise LLMError("an empty prompt: give at least one token (a chat prompt always has some)")
            calls.append(_Call(list(p), int(max_new_tokens), float(temperature), int(top_k or 0), float(top_p),
                               s, tuple(stop or ()), concurrent.futures.Future()))  # fmt: skip
        start = False
        with self._lock:
            for c in calls:
                if c.max_new_tokens <= 0:  # no room: an empty reply, cut by the length limit
                    c.future.set_result(c.gen)
                else:
                    self._pending.append(c)
            if self._pending and not self._running:
                self._running = start = True
        if start:
            threading.Thread(target=self._work, name="cave-generation-engine", daemon=True).start()
        return [c.future for c in calls]

    def submit(self, prompt_ids: Sequence[int], **options: Any) -> concurrent.futures.Future:
        return self.submit_many([prompt_ids], **options)[0]

    async def generate(self, prompt_ids: Sequence[int], **options: Any) -> Generation:
        """One call, awaited (cancelling the await drops the call from the batch at the next step)."""
        return await asyncio.wrap_future(self.submit(prompt_ids, **options))

    def generate_many(self, prompts: Sequence[Sequence[int]], **options: Any) -> list[Generation]:
        """Sync edge: all ``prompts`` decoded together (with any other calls in flight)."""
        return [f.result() for f in self.submit_many(prompts, **options)]

    @property
    def busy(self) -> bool:
        return self._running

    # -- the worker ----------------------------------------------------------------------------------------------------
    def _work(self) -> None:
        if not self.continuous:
            return self._work_in_batches()
        state, taken = _Batch(self), []
        try:
            with self.generation_context(), _inference(self.model), float32_attention():
                while True:
                    with self._lock:
                        if not self._pending and not state.rows:
                            self._running = False
                            break  # the last calls are handed back once the generation context is left
                    _hand_back(state.finished)
                    if not state.rows:
                        self._gather()
                    taken = self._take(self.max_batch - len(state.rows) if state.joinable else 0)
                    state.admit(taken)
                    taken = []
                    if state.rows:
                        state.step()
                        if len(self.stats.step_rows) % TRIM_EVERY == 0:  # a busy period can last the whole eval
                            release_free_heap()
            # after the context: a caller (the trainer) that goes on to update the weights finds them partitioned
            # again under ZeRO-3, not still gathered for generation
            _hand_back(state.finished)
        except BaseException as e:  # a failed forward fails every call in flight, and the engine stays usable
            _hand_back(state.finished)  # those were done before it failed
            with self._lock:
                calls, self._pending = taken + state.rows + self._pending, []
                self._running = False
            for c in calls:
                _resolve(c.future, exception=e)
        finally:
            state = taken = None  # the busy period's KV buffers and prompt states are freed here ...
            release_free_heap()  # ... and their pages given back to the OS (cave.llm.batch_cache)

    def _work_in_batches(self) -> None:
        """For caches this engine cannot pad (sliding windows, linear attention): the calls queued together that ask
        for the same settings are sampled as one batch by ``cave.llm.hf.generate_batch`` (with the first one's seed)."""
        from cave.llm.hf import generate_batch

        while True:
            with self._lock:
                if not self._pending:
                    self._running = False
                    return
            self._gather()
            calls = self._take(len(self._pending))
            groups: dict[tuple, list[_Call]] = {}
            for c in calls:
                groups.setdefault((c.max_new_tokens, c.sampling, c.stop), []).append(c)
            for batch in groups.values():
                for i in range(0, len(batch), self.max_batch):
                    part, c = batch[i : i + self.max_batch], batch[i]
                    self.stats.calls += len(part)
                    self.stats.prefill_calls.append(len(part))
                    try:
                        with self.generation_context():
                            gens = generate_batch(self.model, self.tokenizer, [x.prompt_ids for x in part],
                                                  max_new_tokens=c.max_new_tokens, temperature=c.temperature,
                                                  top_k=c.top_k, top_p=c.top_p, seed=c.seed, stop=c.stop,
                                                  stop_ids=self.stop_ids)  # fmt: skip
                    except BaseException as e:
                        for x in part:
                            _resolve(x.future, exception=e)
                        continue
                    for x, g in zip(part, gens, strict=True):
                        _resolve(x.future, result=g)

    def _gather(self) -> None:
        """Idle and called: wait while more calls keep arriving (concurrent runs start a few ms apart)."""
        waited, seen = 0.0, -1
        while waited < self.max_wait_s:
            n = len(self._pending)
            if n == seen or n >= self.max_batch:
                return
            seen = n
            time.sleep(self.window_s)
            waited += self.window_s

    def _take(self, room: int) -> list[_Call]:
        with self._lock:
            self._pending = [c for c in self._pending if not c.future.cancelled()]
            if room <= 0:
                return []
            taken, self._pending = self._pending[:room], self._pending[room:]
        return taken


class _Batch:
    """The running rows: their left-padded KV cache, attention mask, next positions and next-token logits."""

    def __init__(self, engine: GenerationEngine) -> None:
        import torch

        self.engine = engine
        self.model, self.tok = engine.model, engine.tokenizer
        self.device = next(self.model.parameters()).device
        self.rows: list[_Call] = []
        self.cache: Any = None
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        self.pos = torch.zeros(0, dtype=torch.long, device=self.device)
        self.logits: Any = None  # [rows, vocab] float: the distribution each row samples its next token from
        self.joinable = True  # False for caches this class cannot pad (then new calls wait for an empty batch)
        self.finished: list[_Call] = []  # calls done in the last step, handed back by the worker (see _work)
        self.prompts: dict[tuple[int, ...], tuple[list[tuple[Any, Any]], Any]] = {}  # prompt -> (per-layer kv, logits)
        self.prefixes = PrefixCache(engine.prefix_cache_tokens)  # shared prompt starts -> their per-layer kv
        self.stop_tensor = torch.tensor(sorted(engine.stop_ids), dtype=torch.long, device=self.device)

    # -- admission --------------------------------------------------------------------------------------------------------
    def admit(self, calls: list[_Call]) -> None:
        import torch

        if not calls:
            return
        stats = self.engine.stats
        stats.calls += len(calls)
        stats.prefill_calls.append(len(calls))
        if self.rows:
            stats.joined += len(calls)
        for c in calls:
            if c.seed is not None:
                c.generator = torch.Generator(device=self.device).manual_seed(c.seed)
        self._prefill([c.prompt_ids for c in calls])
        width = max(len(c.prompt_ids) for c in calls)
        states = [self.prompts[tuple(c.prompt_ids)] for c in calls]
        keys = [[kv[i][0] for kv, _ in states] for i in range(len(states[0][0]))]  # per layer, one per call
        values = [[kv[i][1] for kv, _ in states] for i in range(len(states[0][0]))]
        mask = torch.zeros((len(calls), width), dtype=torch.long, device=self.device)
        for b, c in enumerate(calls):
            mask[b, width - len(c.prompt_ids) :] = 1
        pos = torch.tensor([len(c.prompt_ids) for c in calls], dtype=torch.long, device=self.device)
        logits = torch.stack([lg for _, lg in states])
        if not self.rows:
            if self.joinable:
                self.cache = slack_cache(keys, values, width, self.engine.kv_slack, self.engine.kv_dtype,
                                         self.engine.kv_spare_rows)  # fmt: skip
            else:  # a cache this class cannot pad: plain layers, never joined
                self.cache = _new_cache(
                    [stack_right(ks, width) for ks in keys], [stack_right(vs, width) for vs in values]
                )
            self.mask, self.pos, self.logits = mask, pos, logits
        else:
            total = max(width, self.mask.shape[1])
            for layer, ks, vs in zip(self.cache.layers, keys, values, strict=True):
                layer.join(ks, vs, total)
            self.mask = torch.cat([_pad_left(self.mask, total), _pad_left(mask, total)])
            self.pos = torch.cat([self.pos, pos])
            self.logits = torch.cat([self.logits, logits])
        self.rows.extend(calls)
        # keep the newest prompts' states, at most prompt_cache_tokens tokens of them (the KV of a 135M model takes
        # ~46 kB a token in fp32): a group's samples arrive within a few decode steps of each other
        evict(self.prompts, self.engine.prompt_cache_tokens)

    def _prefill(self, prompts: list[list[int]]) -> None:
        """Run the prompts not seen in this busy period (each distinct one once) and remember their KV and logits.

        A prompt that starts with a kept prefix (the role's system prompt, a problem its group's samples share) runs
        only the tokens after it; the prefixes are learned from the prompts themselves (``cave.llm.prefixes``)."""
        todo = list(dict.fromkeys(tuple(p) for p in prompts if tuple(p) not in self.prompts))
        if not todo:
            return
        self.engine.stats.prefilled_prompts += len(todo)
        sharing = self.prefixes.on
        for start, kept in self.prefixes.shared_starts(todo) if sharing else ():
            self._run_prompts([start], kept)  # a start the prompts admitted together share: run once, kept
            self.prefixes.keep(start, self.prompts.pop(start)[0])
        groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for p in todo:
            groups.setdefault(self.prefixes.longest(p) if sharing else (), []).append(p)
        for prefix, group in groups.items():
            self._run_prompts(group, prefix)
        for p in todo if sharing else ():
            self.prefixes.learn(p, self.prompts[p][0], cut=_first_positions)

    def _run_prompts(self, todo: list[tuple[int, ...]], prefix: tuple[int, ...]) -> None:
        """One forward over ``todo``'s tokens after ``prefix`` (the same for every row; () for none), on top of the
        prefix's kept KV. Rows are left-padded, so a row's padding sits between the prefix and its own tokens."""
        import torch

        skip = len(prefix)
        stats = self.engine.stats
        stats.prefill_tokens += sum(len(p) - skip for p in todo)
        stats.prefix_tokens += skip * len(todo)
        width = max(len(p) - skip for p in todo)
        ids = torch.full((len(todo), width), self.engine.pad, dtype=torch.long, device=self.device)
        mask = torch.zeros((len(todo), skip + width), dtype=torch.long, device=self.device)
        mask[:, :skip] = 1
        for b, p in enumerate(todo):  # every row's last prompt token is in the last column
            ids[b, width - (len(p) - skip) :] = torch.tensor(p[skip:], dtype=torch.long)
            mask[b, skip + width - (len(p) - skip) :] = 1
        positions = ((mask.cumsum(-1) - 1).clamp(min=0))[:, skip:]
        inputs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        if skip:
            kv = self.prefixes[prefix]
            keys = [k.expand(len(todo), -1, -1, -1) for k, _ in kv]
            values = [v.expand(len(todo), -1, -1, -1) for _, v in kv]
            inputs[self.engine._cache_kw] = _new_cache(keys, values)
        try:  # only the last position's logits are needed
            out = self.model(**inputs, logits_to_keep=1)
        except TypeError:
            out = self.model(**inputs)
        cache = cache_of(out)
        self.joinable = self.joinable and _plain(cache)
        logits = out.logits[:, -1, :].float()
        layers = list(_layer_kv(cache))
        for b, p in enumerate(todo):
            start = skip + width - (len(p) - skip)
            # copies, so that the padded prefill batch is freed with the prompts it does not keep
            kv = [(torch.cat([k[b : b + 1, :, :skip], k[b : b + 1, :, start:]], dim=2),
                   torch.cat([v[b : b + 1, :, :skip], v[b : b + 1, :, start:]], dim=2)) for k, v in layers]  # fmt: skip
            self.prompts[p] = (kv, logits[b].clone())  # its own: a view would keep the whole batch's logits

    # -- one decode step ------------------------------------------------------------------------------------------------
    def step(self) -> None:
        """Sample every row's next token, hand back the finished calls, and run the others one token further."""
        import torch

        self.engine.stats.step_rows.append(len(self.rows))
        tokens, logps = self._sample()
        keep: list[int] = []
        for i, (c, t, lp) in enumerate(zip(self.rows, tokens.tolist(), logps.tolist(), strict=True)):
            if c.future.cancelled():
                continue
            if self._advance(c, t, lp):
                self.finished.append(c)
            else:
                keep.append(i)
        if len(keep) < len(self.rows):
            if self.engine.kv_spare_rows:  # the order in which the cache moves one row per leaving row
                keep = fill_from_end(keep, len(self.rows))
            index = torch.tensor(keep, dtype=torch.long, device=self.device)
            self.rows = [self.rows[i] for i in keep]
            if not keep:
                self.cache, self.logits = None, None
                self.mask = self.mask[:0, :0]
                self.pos = self.pos[:0]
                return
            self.cache.batch_select_indices(index)
            self.mask, self.pos, tokens = self.mask[index], self.pos[index], tokens[index]
            self._trim()
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        out = self.model(
            input_ids=tokens[:, None],
            attention_mask=self.mask,
            position_ids=self.pos[:, None],
            use_cache=True,
            **{self.engine._cache_kw: self.cache},
        )
        self.cache = cache_of(out)
        self.logits = out.logits[:, -1, :].float()
        self.pos = self.pos + 1

    def _trim(self) -> None:
        """Cut the left columns that no running row attends to (they padded rows that have left)."""
        first = int(self.mask.any(0).to(dtype=self.mask.dtype).argmax())
        if first > 0 and self.joinable:
            for layer in self.cache.layers:
                layer.drop_left(first)
            self.mask = self.mask[:, first:]

    def _sample(self) -> tuple[Any, Any]:
        """Each row's next token and its log-probability, per row settings (greedy: the model's own distribution)."""
        import torch

        logits, rows = self.logits, self.rows
        tokens = torch.empty(len(rows), dtype=torch.long, device=self.device)
        logps = torch.empty(len(rows), dtype=torch.float32, device=self.device)
        groups: dict[tuple[float, int, float], list[int]] = {}
        for i, c in enumerate(rows):
            groups.setdefault(c.sampling if c.temperature > 0 else (0.0, 0, 1.0), []).append(i)
        for (temperature, top_k, top_p), idx in groups.items():
            whole = len(idx) == len(rows)
            part = logits if whole else logits[idx]
            if temperature > 0:
                logp = torch.log_softmax(_filter_logits(part / temperature, top_k, top_p), dim=-1)
                probs = logp.exp()
                picked = torch.empty(len(idx), dtype=torch.long, device=self.device)
                free = [j for j, i in enumerate(idx) if rows[i].generator is None]
                if free:  # unseeded rows: one draw from the global generator
                    picked[free] = torch.multinomial(probs[free], 1).squeeze(-1)
                for j, i in enumerate(idx):  # seeded rows: each from its own generator, as if sampled alone
                    if rows[i].generator is not None:
                        picked[j] = torch.multinomial(probs[j : j + 1], 1, generator=rows[i].generator)[0, 0]
            else:
                logp = torch.log_softmax(part, dim=-1)
                picked = logp.argmax(-1)
            chosen = logp.gather(-1, picked[:, None]).squeeze(-1)
            if whole:
                tokens, logps = picked, chosen
            else:
                where = torch.tensor(idx, dtype=torch.long, device=self.device)
                tokens[where], logps[where] = picked, chosen
        return tokens, logps

    def _advance(self, c: _Call, token: int, logprob: float) -> bool:
        """Record one sampled token; True when the call is finished (its ``gen`` complete)."""
        g = c.gen
        g.token_ids.append(token)
        g.logprobs.append(logprob)
        if token in self.engine.stop_ids:
            g.finish_reason = "stop"
            g.text = self.tok.decode(g.token_ids[:-1], skip_special_tokens=True)
            return True
        if c.stop:  # stop strings: the text so far is needed at every token
            text = self.tok.decode(g.token_ids, skip_special_tokens=True)
            cut = stop_position(text, list(c.stop))
            if cut is not None:
                g.text, g.finish_reason = text[:cut], "stop"
                return True
            g.text = text
        if len(g.token_ids) >= c.max_new_tokens:
            g.finish_reason = "length"
            if not c.stop:
                g.text = self.tok.decode(g.token_ids, skip_special_tokens=True)
            return True
        return False


# -- cache helpers ---------------------------------------------------------------------------------------------------------
def _plain_model(model: Any) -> bool:
    """Whether ``model``'s KV cache is plain growing layers (then calls can join a running batch)."""
    try:
        from transformers import DynamicCache

        return _plain(DynamicCache(config=model.config))
    except Exception:
        return False


def _plain(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a plain growing KV layer (one this engine can pad and trim)."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def _layer_kv(cache: Any) -> list[tuple[Any, Any]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


def _new_cache(keys: list[Any], values: list[Any]) -> Any:
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=list(zip(keys, values, strict=True)))


def _first_positions(kv: list[tuple[Any, Any]], n: int) -> list[tuple[Any, Any]]:
    """A copy of the first ``n`` positions of per-layer KV ``[B, H, L, D]`` (a kept prefix of a prompt's own KV)."""
    return [(k[:, :, :n].clone(), v[:, :, :n].clone()) for k, v in kv]


def _pad_left(t: Any, width: int) -> Any:
    """``t`` padded with zeros on the left of its sequence dimension (-2 for KV ``[B, H, L, D]``, -1 for a mask)."""
    import torch

    dim = -1 if t.dim() == 2 else -2
    missing = width - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([torch.zeros(shape, dtype=t.dtype, device=t.device), t], dim=dim)


def _hand_back(calls: list[_Call]) -> None:
    """Resolve the finished calls' futures with their generations, and empty the list."""
    for c in calls:
        _resolve(c.future, result=c.gen)
    calls.clear()


def _resolve(future: concurrent.futures.Future, *, result: Any = None, exception: BaseException | None = None) -> None:
    """Set a call's outcome unless its caller has given up on it (cancelled)."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
