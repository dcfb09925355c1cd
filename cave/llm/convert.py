"""GGUF -> plain HF-format checkpoint, converted once and cached under ``$CAVE_HOME/hf``.

The trainer and the transformers backend need ordinary PyTorch weights; the embedded models
ship as GGUF. transformers can read a GGUF (``from_pretrained(dir, gguf_file=...)``, dequantizing
every tensor: SmolLM2 ~35 s, Qwen ~80 s on two cores) but the result refuses ``save_pretrained``
because its config says "quantized with gguf". So: load once, drop ``config.quantization_config``,
build a fresh model ``from_config``, ``load_state_dict`` the dequantized weights and save that,
with the tokenizer (its chat template included). Reloading the saved checkpoint takes seconds.

    >>> path = hf_checkpoint("smollm2")            # doctest: +SKIP
    >>> TransformersLLM(path)                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from cave.llm import models
from cave.llm.base import LLMError

__all__ = ["MARKER", "conversion_report", "convert_gguf", "hf_checkpoint", "hf_dir"]

MARKER = "cave-convert.json"  # written last: a directory without it is an unfinished conversion


def hf_dir() -> Path:
    """Where converted checkpoints live: ``$CAVE_HOME/hf``."""
    return models.cave_home() / "hf"


def hf_checkpoint(name: str = "smollm2", *, dtype: str = "bfloat16", force: bool = False) -> Path:
    """A plain HF checkpoint directory of an embedded model (``"smollm2"`` | ``"qwen"``), converted on first use.

    ``dtype`` is the storage dtype (bfloat16 halves the files; load with ``dtype=torch.float32`` to train in
    fp32). The cache key includes the GGUF's sha256, so a different model file never reuses a stale conversion.
    """
    key = models.resolve_name(name)
    if key is None:
        raise LLMError(f"unknown embedded model {name!r}; known: {', '.join(sorted(models.MODELS))}")
    spec = models.MODELS[key]
    target = hf_dir() / f"{key}-{spec.sha256[:12]}-{dtype}"
    if not force and (target / MARKER).is_file():
        return target
    gguf = models.model_path(key)  # verified before we spend a minute converting it
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        report = convert_gguf(gguf, tmp, dtype=dtype)
        for p in [tmp, *tmp.iterdir()]:  # mkdtemp makes 0700; the cache may be shared
            p.chmod(0o755 if p.is_dir() else 0o644)
        report.update({"model": key, "sha256": spec.sha256})
        (tmp / MARKER).write_text(json.dumps(report, indent=2))
        if target.exists():  # forced, or another process finished first: replace with ours
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def conversion_report(path: Path) -> dict[str, Any]:
    """What ``hf_checkpoint`` recorded about a conversion (timings, source, versions)."""
    return json.loads((Path(path) / MARKER).read_text())


def convert_gguf(
    gguf: str | os.PathLike[str], out: str | os.PathLike[str], *, dtype: str = "bfloat16"
) -> dict[str, Any]:
    """Write a plain (unquantized) HF checkpoint + tokenizer of ``gguf`` into ``out``. Returns timings."""
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise LLMError(f"converting a GGUF needs torch, transformers and gguf: pip install 'cave[train]' ({e})") from e
    gguf, out = Path(gguf), Path(out)
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise LLMError(f"unknown dtype {dtype!r}: use 'bfloat16', 'float16' or 'float32'")
    t0 = time.perf_counter()
    where = {"gguf_file": gguf.name, "local_files_only": True}  # never the hub
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **where)
        quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **where)
    except ImportError as e:
        raise LLMError(f"transformers needs the gguf package to read {gguf}: pip install gguf ({e})") from e
    t_load = time.perf_counter() - t0
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the only thing that stops save_pretrained
    config.dtype = torch_dtype
    plain = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    result = plain.load_state_dict(quantized.state_dict(), strict=False)
    # Tied output embeddings may be absent from one side; anything else missing is a real conversion bug.
    missing = [k for k in result.missing_keys if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or result.unexpected_keys:
        raise LLMError(
            f"converting {gguf.name}: weights did not match the {type(plain).__name__} built from its config "
            f"(missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}); transformers "
            f"{transformers.__version__} may not support this architecture's GGUF"
        )
    del quantized
    _set_stop_tokens(plain, tokenizer)
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    t_total = time.perf_counter() - t0
    return {
        "source": str(gguf),
        "dtype": dtype,
        "architecture": type(plain).__name__,
        "parameters": sum(p.numel() for p in plain.parameters()),
        "seconds_read_gguf": round(t_load, 2),
        "seconds_total": round(t_total, 2),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }


def _set_stop_tokens(model: Any, tokenizer: Any) -> None:
    """Make generation stop at the chat template's end-of-turn token (the GGUF's eos) as llama.cpp does."""
    eos = [i for i in [tokenizer.eos_token_id, model.config.eos_token_id] if isinstance(i, int)]
    gen = model.generation_config
    gen.eos_token_id = list(dict.fromkeys(eos)) or None
    if tokenizer.pad_token_id is not None:
        gen.pad_token_id = tokenizer.pad_token_id
