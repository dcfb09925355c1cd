"""Portable CPU kernels, so that a warm start rebuilt on another machine has the same weights.

Fine-tuning the same model on the same teacher runs gave three different warm starts on three machines (two Intel
Xeons agreed; two AMD EPYCs did not): torch picks AVX-512 or AVX2 code paths by CPU, MKL picks its own, and their
float sums differ in the last bits, which 3 epochs of AdamW turn into other weights. A comparison whose runs must
share one warm start then has to finish within one machine's lifetime. Under ``PORTABLE`` (torch's kernels at AVX2,
MKL's conditional numerical reproducibility at AVX2, oneDNN capped at AVX2) every x86-64 machine with AVX2 should
take the same code paths. Whether two machines really agree is checked in seconds, before 15 minutes of
fine-tuning: ``fingerprint()`` digests one forward and backward pass of the model under those kernels.

Measured: two AMD EPYC machines (one of them AVX2 only) agree under ``PORTABLE`` (62e783ad5489cf5c), an Intel
Xeon with AMX does not (93099d3dc1c134dd), and no other ``MKL_CBWR`` branch on that Xeon (COMPATIBLE, SSE4_2, AVX,
``AVX2,STRICT``, AVX512) nor ``ATEN_CPU_CAPABILITY=default`` gives the EPYCs' digest: MKL documents ``MKL_CBWR=AVX2`` as
falling back to its AUTO branch on non-Intel CPUs, so the two vendors run other GEMMs. A warm start therefore
travels within one vendor's machines, not across them. (Its COMPATIBLE branch might agree across vendors; it is
untested there and 2.2x slower a float32 GEMM on that Xeon.)

    python -m cave.training.experiments.kernels        # this machine's fingerprint under PORTABLE (a subprocess)
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PORTABLE", "active", "cpu_name", "fingerprint", "portable_env", "portable_fingerprint", "run_portable"]

# read by torch, MKL and oneDNN when they load: they must be in the environment before ``import torch``
PORTABLE = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def portable_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``PORTABLE`` set.

    >>> portable_env({"PATH": "/bin"})["ATEN_CPU_CAPABILITY"], portable_env({})["MKL_CBWR"]
    ('avx2', 'AVX2')
    """
    return {**(os.environ if base is None else base), **PORTABLE}


def active(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``env`` (default: this process's) runs under ``PORTABLE``.

    >>> active(portable_env({})), active({})
    (True, False)
    """
    env = os.environ if env is None else env
    return all(env.get(k) == v for k, v in PORTABLE.items())


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint(model: Any = None, *, threads: int = 2) -> str:
    """A digest of one forward and backward pass (logits and the first 20 gradients) of ``model`` (default: the
    embedded SmolLM2-135M, float32) on fixed random tokens, in this process's kernels: two machines that give the
    same fingerprint under ``PORTABLE`` fine-tune to the same weights."""
    import torch

    torch.set_num_threads(threads)
    if model is None:
        from transformers import AutoModelForCausalLM

        from cave.llm import hf_checkpoint

        model = AutoModelForCausalLM.from_pretrained(hf_checkpoint("smollm2"), dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, int(model.config.vocab_size), (4, 64), generator=g)
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    h = hashlib.sha256(out.logits.detach().numpy().tobytes())
    for p in list(model.parameters())[:20]:
        if p.grad is not None:
            h.update(p.grad.numpy().tobytes())
    model.zero_grad(set_to_none=True)
    return h.hexdigest()[:16]


def run_portable(argv: Sequence[str], *, check: bool = True) -> int:
    """Run ``python argv...`` under ``PORTABLE`` (a subprocess: the kernels are chosen when torch loads)."""
    done = subprocess.run([sys.executable, *argv], env=portable_env(), check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` under portable kernels exited {done.returncode}")
    return done.returncode


def portable_fingerprint() -> dict[str, str]:
    """This machine's fingerprint under ``PORTABLE`` (computed in a subprocess), with its CPU's name."""
    out = subprocess.run([sys.executable, "-m", "cave.training.experiments.kernels", "--here"], env=portable_env(),
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--here" in args:  # in this process's kernels, whatever they are
        print(json.dumps({"fingerprint": fingerprint(), "cpu": cpu_name(), "portable": active()}))
        return 0
    print(json.dumps(portable_fingerprint()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
