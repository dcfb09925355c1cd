"""The transformers backend: an HF-format model (a directory, or a live ``nn.Module``) on CPU or CUDA.

This is the backend whose tokens the trainer can trust: it samples with its own small loop
(KV cache, left padding for batches) so it knows, for every response token, the id and the
log-probability it was sampled with, and it runs the very model object the trainer updates.

Log-probabilities are those of the sampled token under the distribution actually sampled from:
``log_softmax(logits / temperature)`` after any top-k / top-p filtering (renormalized). With
``temperature == 0`` (greedy) the distribution used is the model's own, ``log_softmax(logits)``
(temperature 1, no filtering), since the greedy "distribution" is degenerate.

Response ``token_ids`` are every sampled token, the end-of-turn token included when generation
stopped on it (so a trainer sees the model learn to stop); ``text`` excludes it, and is cut
before a stop string, while ``token_ids`` end with the token that completed the stop string.

A response ``prefix`` (``stream(..., prefix="```python\n")``, ``generate_batch(..., prefix=...)``) is
appended to the rendered prompt text before tokenizing: its tokens are prompt ids, never response ids
(so the trainer never trains on them); ``Completion.text`` starts with it, ``Generation.text`` does not.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cave.llm import models
from cave.llm.base import LLM, Completion, LLMError, Message, Request, StreamItem, TextDelta, Usage, register_backend
from cave.llm.decoding import held_back, iterate_in_thread, reply_room, stop_position
from cave.llm.tool_calls import normalize_messages, take_tool_calls

__all__ = [
    "Generation",
    "INSTALL_HINT",
    "TransformersLLM",
    "encode_chat",
    "generate_batch",
    "load",
    "score_responses",
    "stop_token_ids",
]

INSTALL_HINT = "the transformers backend needs torch and transformers: pip install 'cave[train]'"


@dataclass
class Generation:
    """One sampled response: what the trainer needs (ids, logprobs) and what a reader needs (text)."""

    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""  # the generated text (without the response prefix)
    finish_reason: str = "length"  # "stop" (end-of-turn token or stop string) | "length"
    prefix: str = ""  # the response prefix the prompt ended with, if any

    def completion(self, model: str, finish_reason: str | None = None) -> Completion:
        """This response as a backend's Completion (usage counted from the ids)."""
        prompt, reply = len(self.prompt_ids), len(self.token_ids)
        return Completion(
            text=self.prefix + self.text,
            usage=Usage(prompt, reply, prompt + reply),
            finish_reason=finish_reason or self.finish_reason,
            token_ids=self.token_ids,
            logprobs=self.logprobs,
            prompt_token_ids=list(self.prompt_ids),
            model=model,
        )


def encode_chat(
    tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]] | None = None, prefix: str = ""
) -> list[int]:
    """Prompt token ids of ``messages`` through the tokenizer's chat template, generation prompt appended,
    then the response ``prefix`` (tokenized with the prompt text, as vLLM's ``continue_final_message`` does)."""
    if not getattr(tokenizer, "chat_template", None):
        raise LLMError("the tokenizer has no chat template: pass chat_template=... or use a chat/instruct checkpoint")
    text = tokenizer.apply_chat_template(
        normalize_messages(messages), tools=tools, add_generation_prompt=True, tokenize=False
    )
    text += prefix
    # The template writes the special tokens itself; adding them again would double the BOS.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def stop_token_ids(tokenizer: Any, model: Any = None) -> set[int]:
    """End-of-turn ids: the tokenizer's eos plus the model's generation_config eos (an int or a list)."""
    ids: set[int] = set()
    candidates = [getattr(tokenizer, "eos_token_id", None)]
    gen = getattr(model, "generation_config", None)
    if gen is not None:
        candidates.append(gen.eos_token_id)
    for c in candidates:
        if isinstance(c, int):
            ids.add(c)
        elif isinstance(c, list | tuple):
            ids.update(i for i in c if isinstance(i, int))
    return ids


def cache_kwarg(model: Any) -> str:
    """The forward's name for the KV cache argument: ``cache`` (transformers >= 5.2x) or ``past_key_values``."""
    import inspect

    try:
        return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    except (TypeError, ValueError):
        return "past_key_values"


def cache_of(output: Any) -> Any:
    """The KV cache a forward returned (``output.cache``, or ``past_key_values`` on older transformers)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _filter_logits(scaled: Any, top_k: int, top_p: float) -> Any:
    import torch

    if top_k and 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the tokens ranked above it already cover top_p (the top token always stays)
        drop_sorted = (probs.cumsum(-1) - probs) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    return scaled


def _sample(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    out: list[Generation],
    *,
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int | None,
    stop: Sequence[str],
    stop_ids: set[int],
) -> Iterator[list[str]]:
    """The sampling loop. Fills ``out`` (one Generation per prompt) and yields each step's text deltas."""
    import torch

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (min(stop_ids) if stop_ids else 0)
    if max(len(p) for p in prompts) == 0:
        raise LLMError("an empty prompt: give at least one token (a chat prompt always has some)")
    # Identical prompts (the N samples of one RL prompt group) are prefilled once; their cache rows are copied.
    unique: dict[tuple[int, ...], int] = {}
    row_of = torch.tensor([unique.setdefault(tuple(p), len(unique)) for p in prompts], device=device)
    width = max(len(p) for p in unique)
    ids = torch.full((len(unique), width), pad, dtype=torch.long, device=device)
    mask = torch.zeros((len(unique), width), dtype=torch.long, device=device)
    for b, p in enumerate(unique):  # left padding: every row's last prompt token is in the last column
        if p:
            ids[b, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[b, width - len(p) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    out[:] = [Generation(prompt_ids=list(p)) for p in prompts]
    emitted = [0] * len(prompts)
    active = torch.ones(len(prompts), dtype=torch.bool, device=device)
    stop_tensor = torch.tensor(sorted(stop_ids), dtype=torch.long, device=device)
    cache_kw = cache_kwarg(model)
    prefill = dict(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
    try:  # only the last position's logits are needed (the full vocabulary at every prompt position is not)
        output = model(**prefill, logits_to_keep=1)
    except TypeError:
        output = model(**prefill)
    past = cache_of(output)
    if len(unique) < len(prompts):
        past.batch_select_indices(row_of)
    logits = output.logits[row_of, -1, :].float()
    mask, step_pos, step_ids = mask[row_of], positions[row_of], None
    for n in range(max_new_tokens):
        if n:
            output = model(
                input_ids=step_ids, attention_mask=mask, position_ids=step_pos, use_cache=True, **{cache_kw: past}
            )
            past = cache_of(output)
            logits = output.logits[:, -1, :].float()
        if temperature > 0:
            logp = torch.log_softmax(_filter_logits(logits / temperature, top_k, top_p), dim=-1)
            token = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
        else:
            logp = torch.log_softmax(logits, dim=-1)
            token = logp.argmax(-1)
        token = torch.where(active, token, torch.full_like(token, pad))
        token_logp = logp.gather(-1, token[:, None]).squeeze(-1)
        deltas = [""] * len(prompts)
        for b in active.nonzero().flatten().tolist():
            deltas[b] = _advance(out[b], int(token[b]), float(token_logp[b]), stop_ids, stop, tokenizer, emitted, b)
        active &= ~torch.isin(token, stop_tensor)
        active &= torch.tensor([g.finish_reason != "stop" for g in out], device=device)
        yield deltas
        if not bool(active.any()):
            break
        step_ids = token[:, None]
        step_pos = step_pos[:, -1:] + 1
        mask = torch.cat([mask, torch.ones_like(mask[:, -1:])], dim=-1)  # finished rows feed pads nobody reads
    tail = [""] * len(prompts)
    for b, g in enumerate(out):
        if len(g.text) > emitted[b]:
            tail[b] = g.text[emitted[b] :]
    if any(tail):
        yield tail


def _advance(
    g: Generation,
    token: int,
    logprob: float,
    stop_ids: set[int],
    stop: Sequence[str],
    tokenizer: Any,
    emitted: list[int],
    b: int,
) -> str:
    """Record one sampled token in ``g``; return the text now safe to stream."""
    g.token_ids.append(token)
    g.logprobs.append(logprob)
    if token in stop_ids:
        g.finish_reason = "stop"
        return ""
    text = tokenizer.decode(g.token_ids, skip_special_tokens=True)
    cut = stop_position(text, list(stop))
    if cut is not None:
        g.text, g.finish_reason = text[:cut], "stop"
        safe = cut
    else:
        g.text = text
        safe = len(text) - held_back(text, list(stop))
        if text.endswith("\ufffd"):  # a character split over tokens: wait for its other bytes
            safe = min(safe, len(text) - 1)
    if safe <= emitted[b]:
        return ""
    delta, emitted[b] = text[emitted[b] : safe], safe
    return delta


def generate_batch(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]] | Sequence[list[Message]],
    *,
    max_new_tokens: int = 256,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
    stop: Sequence[str] = (),
    stop_ids: set[int] | None = None,
    prefix: str = "",
) -> list[Generation]:
    """Sample responses for many prompts at once (left-padded batch), with token ids and logprobs.

    ``prompts`` are token-id lists, or chat message lists (rendered with the chat template).
    ``model`` is any causal LM module (e.g. the trainer's current policy): it is run in eval
    mode under ``torch.no_grad`` and put back in the mode it was in. ``prefix``: a response prefix, appended
    to chat prompts (token-id prompts must already end with it); each Generation records it.
    """
    if not prompts:
        return []
    encoded = [encode_chat(tokenizer, p, prefix=prefix) if _is_messages(p) else list(p) for p in prompts]
    stop_ids = stop_ids if stop_ids is not None else stop_token_ids(tokenizer, model)
    out: list[Generation] = []
    with _inference(model):
        for _ in _sample(
            model,
            tokenizer,
            encoded,
            out,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            stop=stop,
            stop_ids=stop_ids,
        ):
            pass
    for g in out:
        g.prefix = prefix
    return out


@contextlib.contextmanager
def _inference(model: Any) -> Iterator[None]:
    """``model`` in eval mode under ``torch.no_grad``, put back in the mode it was in afterwards."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def score_responses(
    model: Any,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    pad_id: int = 0,
) -> list[list[float]]:
    """Log-probabilities of given response tokens under ``model`` (teacher forcing, one batched forward).

    With the ``temperature`` used when sampling (without top-k/top-p) this reproduces the
    ``logprobs`` that ``generate_batch`` returned, which is how the trainer's "old" logprobs are checked.
    """
    import torch

    device = next(model.parameters()).device
    seqs = [list(p) + list(r) for p, r in zip(prompts, responses, strict=True)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for b, s in enumerate(seqs):  # right padding: positions start at 0 on every row
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[b, : len(s)] = 1
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
    scale = temperature if temperature > 0 else 1.0
    logp = torch.log_softmax(logits / scale, dim=-1)
    result = []
    for b, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        n, m = len(p), len(r)
        # the logits at position t predict token t + 1
        picked = logp[b, n - 1 : n + m - 1].gather(-1, torch.tensor(list(r), device=device)[:, None]).squeeze(-1)
        result.append(picked.tolist())
    return result


def _is_messages(p: Any) -> bool:
    return bool(p) and isinstance(p[0], dict)


def load(path: str | os.PathLike[str], *, device: str | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) from an HF-format directory, local files only. CUDA if available, else CPU."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise LLMError(f"{INSTALL_HINT} ({e})") from e
    path = Path(path).expanduser()
    if not (path / "config.json").is_file():
        raise LLMError(
            f"{path} is not an HF-format checkpoint (no config.json); give a directory made by save_pretrained"
        )
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dtype is None:  # fp32 on CPU (bf16 matmuls are slow on most CPUs), bf16 on GPU
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    elif isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True).to(device)
    except (OSError, ValueError) as e:
        raise LLMError(f"transformers could not load {path}: {e}") from e
    model.eval()
    return model, tokenizer


@register_backend("transformers")
class TransformersLLM(LLM):
    """An HF causal LM as a cave backend: chat template, seeded sampling, token ids and logprobs.

    ``model``: an HF-format directory, an embedded model name (``"smollm2"``, ``"qwen"``: its
    GGUF is converted once, see ``cave.llm.convert``), or a live model object, with ``tokenizer``.
    """

    name = "transformers"
    supports_prefix = True

    def __init__(
        self,
        model: Any = "smollm2",
        tokenizer: Any = None,
        *,
        device: str | None = None,
        dtype: Any = None,
        context_window: int | None = None,
        seed: int | None = None,
        top_k: int = 0,
        top_p: float = 1.0,
        chat_template: str | None = None,
    ) -> None:
        if isinstance(model, str | os.PathLike):
            self.model_name = models.resolve_name(str(model)) or Path(model).name
            if isinstance(model, str) and models.resolve_name(model) and not Path(model).exists():
                from cave.llm.convert import hf_checkpoint

                model = hf_checkpoint(model)
            self.model, loaded_tokenizer = load(model, device=device, dtype=dtype)
            tokenizer = tokenizer or loaded_tokenizer
        else:
            if tokenizer is None:
                raise LLMError("TransformersLLM(model=<a live model>) needs its tokenizer: pass tokenizer=...")
            self.model = model
            self.model_name = getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__
        self.tokenizer = tokenizer
        if chat_template:
            tokenizer.chat_template = chat_template
        config = getattr(self.model, "config", None)
        self.context_window = context_window or getattr(config, "max_position_embeddings", None) or 2048
        self.seed = seed
        self.top_k, self.top_p = top_k, top_p
        self.supports_tools = "tools" in (getattr(tokenizer, "chat_template", None) or "")
        self._lock = threading.Lock()

    def encode(self, messages: list[Message], tools: list[dict[str, Any]] | None = None, prefix: str = "") -> list[int]:
        return encode_chat(self.tokenizer, messages, tools, prefix)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate_batch(
        self, prompts: Sequence[Sequence[int]] | Sequence[list[Message]], **kwargs: Any
    ) -> list[Generation]:
        """Batched sampling on this backend's model (see the module function ``generate_batch``)."""
        kwargs.setdefault("top_k", self.top_k)
        kwargs.setdefault("top_p", self.top_p)
        with self._lock:
            return generate_batch(self.model, self.tokenizer, prompts, **kwargs)

    async def _stream(self, messages: list[Message], request: Request) -> AsyncIterator[StreamItem]:
        prompt_ids = self.encode(messages, request.tools, request.prefix)
        cancel = threading.Event()
        options = {
            "max_new_tokens": reply_room(self, len(prompt_ids), request.max_tokens),
            "temperature": request.temperature,
            "top_k": request.options.get("top_k", self.top_k),
            "top_p": request.options.get("top_p", self.top_p),
            "seed": request.seed if request.seed is not None else self.seed,
            "stop": request.stop,
        }
        if request.prefix:
            yield TextDelta(request.prefix)
        gen = self._generate(prompt_ids, options, cancel, request.prefix)
        # aclosing: if the caller stops early, the worker is told to stop (and frees the model) at once
        async with contextlib.aclosing(iterate_in_thread(gen, cancel)) as items:
            async for item in items:
                if isinstance(item, Completion) and request.tools:
                    take_tool_calls(item, request.tools)
                yield item

    def _generate(
        self, prompt_ids: list[int], options: dict[str, Any], cancel: threading.Event, prefix: str = ""
    ) -> Iterator[StreamItem]:
        out: list[Generation] = []
        with self._lock, _inference(self.model):
            stop_ids = stop_token_ids(self.tokenizer, self.model)
            for deltas in _sample(self.model, self.tokenizer, [prompt_ids], out, stop_ids=stop_ids, **options):
                if deltas[0]:
                    yield TextDelta(deltas[0])
                if cancel.is_set():
                    break
        g = out[0]
        g.prefix = prefix
        finish = "cancelled" if cancel.is_set() and g.finish_reason == "length" else g.finish_reason
        yield g.completion(self.model_name, finish)
