"""Rollout engines: a model's CURRENT policy weights served to cave team runs, with weight sync and sleep/wake.

An engine holds one policy model for rollouts. Its ``llm`` is an ordinary cave backend whose every
Completion carries ``prompt_token_ids``, ``token_ids`` and per-token ``logprobs`` (what the trainer
turns into samples); between rollouts the trainer pushes its updated weights with ``load_weights``
and may ``sleep`` the engine while it computes gradients::

    engine = build_engine("vllm_server", model_dir, tokenizer, python=".venv-vllm/bin/python")
    team = policy_team(spec, role_models, {"base": engine.llm}, ...)
    ...                                     # rollout, then the update
    engine.load_weights(trainable_weights(model))   # only the layers that train
    engine.close()

Engines (``build_engine(kind, ...)``; add one with ``@register_engine("name")``):

``transformers``
    ``cave.training.rollout.BatchedPolicyLLM`` on a live torch model, in this process: every call in flight decoded
    in one batch that calls join and leave between decode steps (``cave.llm.engine``). When the engine's
    model IS the trainer's model (the default on CPU) ``load_weights`` has nothing to do, and its generations
    run inside the trainer's ``generation_context`` (under DeepSpeed ZeRO-3: the weights gathered once a batch).
``vllm``
    vLLM in this process (``cave.llm.vllm.VLLMEngine``; CUDA): weights through a safetensors file
    and ``collective_rpc``, prefix cache reset, ``sleep(level=1)`` / ``wake_up``.
``vllm_server``
    A vLLM OpenAI-compatible server at any URL, reached with cave's ``openai`` backend
    (``cave.training.vllm_server``: the engine, and ``launch_vllm_server`` to start such a server).

The parameter names are the HF checkpoint's (``model.layers.3.self_attn.q_proj.weight``). vLLM fuses
some of them (q/k/v, gate/up): send a fused group whole (a whole layer always is).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cave.registry import Registry

__all__ = [
    "ENGINES",
    "PolicyEngine",
    "TransformersEngine",
    "VLLMInProcessEngine",
    "build_engine",
    "check_names",
    "checkpoint_names",
    "model_dir",
    "model_folder",
    "register_engine",
    "trainable_weights",
]

log = logging.getLogger(__name__)


@runtime_checkable
class PolicyEngine(Protocol):
    """What the trainer needs from a rollout engine."""

    llm: Any  # a cave LLM: every Completion has prompt_token_ids, token_ids and logprobs

    def load_weights(self, named_tensors: Mapping[str, Any]) -> None:
        """Make the engine sample from these weights (HF names; the full state dict or a part of it)."""

    def sleep(self) -> None:
        """Release the accelerator memory between rollouts (a no-op where the engine cannot)."""

    def wake(self) -> None:
        """Undo ``sleep`` before the next rollout."""

    def close(self) -> None:
        """Stop the engine and release what it holds (a server it launched, files)."""


# -- the registry ---------------------------------------------------------------------------------
def _import_builtin_engines() -> None:
    import cave.training.vllm_server  # noqa: F401 - registers "vllm_server"


ENGINES: Registry[Callable[..., PolicyEngine]] = Registry(
    "rollout engine", builtins=("transformers", "vllm", "vllm_server"), loader=_import_builtin_engines
)


def register_engine(name: str) -> Callable[[Callable[..., PolicyEngine]], Callable[..., PolicyEngine]]:
    """Decorator: make an engine available to ``build_engine`` (and to ``rollout.engine`` in configs) by name."""
    return ENGINES.register(name, name_attr="kind")


def build_engine(kind: str, model: Any, tokenizer: Any = None, **settings: Any) -> PolicyEngine:
    """An engine of ``kind`` for ``model`` (an HF directory or a live torch model) and its tokenizer.

    >>> build_engine("nope", "dir")
    Traceback (most recent call last):
    ...
    cave.registry.UnknownName: unknown rollout engine 'nope'; known rollout engines: transformers, vllm, vllm_server
    """
    return ENGINES.get(kind)(model, tokenizer, **settings)


def trainable_weights(model: Any, *, only_trainable: bool = True) -> dict[str, Any]:
    """``{HF name: tensor}`` of the parameters that train (all of them with ``only_trainable=False``): what to sync."""
    return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad or not only_trainable}


def check_names(named_tensors: Mapping[str, Any], known: Sequence[str] | set[str], where: str) -> None:
    """Raise a KeyError naming the tensors that ``known`` (the model's parameter names) does not have.

    >>> check_names({"a": 1, "b": 2, "zz": 3}, {"a", "b"}, "model X")
    Traceback (most recent call last):
    ...
    KeyError: "1 of 3 tensors do not name a parameter of model X: ['zz'] (its names look like ['a', 'b']); send HF parameter names, e.g. from model.named_parameters()"
    """
    known = set(known)
    unknown = [n for n in named_tensors if n not in known]
    if unknown:
        raise KeyError(
            f"{len(unknown)} of {len(named_tensors)} tensors do not name a parameter of {where}: {unknown[:5]} "
            f"(its names look like {sorted(known)[:3]}); send HF parameter names, e.g. from model.named_parameters()"
        )


def checkpoint_names(model_dir: str | os.PathLike[str] | None) -> set[str] | None:
    """The parameter names in an HF checkpoint's safetensors files (headers only), or None when unknown.

    ``lm_head.weight`` is always allowed: a checkpoint with tied embeddings does not store it.
    """
    if model_dir is None or not Path(model_dir).is_dir():
        return None
    from safetensors import safe_open

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return None
    names = {"lm_head.weight"}
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            names.update(st.keys())
    return names


def model_dir(source: str) -> Path:
    """The HF-format folder of a model source: an embedded model name is converted once (cached), else the path."""
    from cave.llm import models

    if models.resolve_name(source) and not Path(source).exists():
        from cave.llm.convert import hf_checkpoint

        return Path(hf_checkpoint(source))
    return Path(source)


def model_folder(model: Any, tokenizer: Any) -> tuple[Path, tempfile.TemporaryDirectory | None]:
    """An HF directory for ``model``: the path itself, or a live model (and its tokenizer) saved to a temp folder."""
    if isinstance(model, str | os.PathLike):
        path = model_dir(str(model))
        if not path.exists():
            raise FileNotFoundError(f"{model}: no such model directory")
        return path, None
    if tokenizer is None:
        raise ValueError("a live model needs its tokenizer, to save them together for vLLM")
    tmp = tempfile.TemporaryDirectory(prefix="cave-policy-")
    model.save_pretrained(tmp.name)
    tokenizer.save_pretrained(tmp.name)
    return Path(tmp.name), tmp


# -- transformers: the live model, in this process -------------------------------------------------------
@register_engine("transformers")
class TransformersEngine:
    """``BatchedPolicyLLM`` (or ``TransformersLLM`` with ``batched=False``) on a live torch model.

    ``model``: the live model (usually the very object the trainer updates) or an HF directory.
    ``load_weights`` copies tensors into the engine's model, skipping those that already are its own.
    ``generation_context``: a callable giving the context manager every generation runs in (the trainer's
    ``AgentPolicies.for_generation``: under DeepSpeed ZeRO-3 the partitioned weights are gathered there).
    """

    kind = "transformers"

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        batched: bool = True,
        device: str | None = None,
        dtype: Any = None,
        seed: int | None = None,
        generation_context: Callable[[], Any] | None = None,
        **llm_options: Any,
    ) -> None:
        if isinstance(model, str | os.PathLike):
            from cave.llm import hf

            path, _ = model_folder(model, None)
            model, loaded = hf.load(path, device=device, dtype=dtype)
            tokenizer = tokenizer or loaded
        if tokenizer is None:
            raise ValueError("the transformers engine needs the model's tokenizer")
        self.model, self.tokenizer = model, tokenizer
        if batched:
            from cave.training.rollout import BatchedPolicyLLM

            self.llm = BatchedPolicyLLM(model, tokenizer, generation_context=generation_context, **llm_options)
        else:
            from cave.training.rollout import LivePolicyLLM

            self.llm = LivePolicyLLM(model, tokenizer, seed=seed, generation_context=generation_context, **llm_options)
        self.weight_version = 0

    def load_weights(self, named_tensors: Mapping[str, Any]) -> None:
        """Copy the tensors in (between rollouts: a generation running meanwhile would see half of them)."""
        import torch

        state = self.model.state_dict(keep_vars=True)
        check_names(named_tensors, state, type(self.model).__name__)
        copy = {}
        for name, t in named_tensors.items():
            mine = state[name]
            if t is mine or (t.device == mine.device and t.data_ptr() == mine.data_ptr() and t.shape == mine.shape):
                continue  # the trainer's model IS this model: nothing to copy
            if t.shape != mine.shape:
                raise ValueError(f"{name}: shape {tuple(t.shape)} does not fit the model's {tuple(mine.shape)}")
            copy[name] = t
        if copy:
            with torch.no_grad():
                self.model.load_state_dict(copy, strict=False)
        self.weight_version += 1

    def sleep(self) -> None:  # the trainer's own model: nothing to release
        pass

    def wake(self) -> None:
        pass

    def close(self) -> None:
        pass


# -- vllm: in this process (CUDA) -------------------------------------------------------------------------
@register_engine("vllm")
class VLLMInProcessEngine:
    """``cave.llm.vllm.VLLMEngine`` with weight sync on; ``sleep``/``wake`` when ``enable_sleep_mode``.

    Without vllm or a CUDA device the constructor raises cave's LLMError that says what to use instead.
    A live model is saved to a temp folder first (vLLM loads from disk). Other settings go to VLLMEngine.
    """

    kind = "vllm"

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        enable_sleep_mode: bool = False,
        sleep_level: int = 1,
        **settings: Any,
    ) -> None:
        from cave.llm.base import LLMError
        from cave.llm.vllm import INSTALL_HINT, VLLMEngine, vllm_available

        ok, why = vllm_available()
        if not ok and (settings.get("require_cuda", True) or why == "vllm is not installed"):
            raise LLMError(f"{INSTALL_HINT} ({why})")  # before saving a model nobody will load
        path, self._tmp = model_folder(model, tokenizer)
        self.names = checkpoint_names(path)
        try:
            self.llm = VLLMEngine(str(path), enable_sleep_mode=enable_sleep_mode, weight_sync=True, **settings)
        except BaseException:
            self._cleanup()
            raise
        self.sleep_level = sleep_level
        self.last_sync: dict[str, Any] = {}

    def load_weights(self, named_tensors: Mapping[str, Any]) -> None:
        if self.names is not None:
            check_names(named_tensors, self.names, f"the checkpoint {self.llm.model_name}")
        self.last_sync = self.llm.load_weights(named_tensors)

    def sleep(self) -> None:
        if self.llm.sleep_mode:
            self.llm.sleep(self.sleep_level)

    def wake(self) -> None:
        if self.llm.sleep_mode:
            self.llm.wake_up()

    def close(self) -> None:
        self.llm.close()
        self._cleanup()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
