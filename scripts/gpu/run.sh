#!/bin/bash
# The GPU check: cave train (bf16, transformers engine) plain / ZeRO-2 / ZeRO-3, then perf.train vs TRL.
# usage: bash scripts/gpu/run.sh DEVICE STEPS OUT   (DEVICE cuda on the GPU machine; cpu for a dry run)
# Needs, beside the working tree: .whl/ (wheels of what the GPU image lacks: pydantic, sqlalchemy, trl, datasets,
# deepspeed built with DS_BUILD_OPS=0, transformers, and cave itself) and .gpu/smol/ (SmolLM2-135M's config and
# tokenizer files, e.g. from ~/.cache/cave/hf/smollm2-*/ without model.safetensors: the weights are random).
# Env: RUNS (plain zero2 zero3), PERF_SIZES (8x8 2x4; empty: no perf run), TRAIN_LIMIT / PERF_LIMIT (seconds each).
DEV=${1:-cuda}; STEPS=${2:-12}; OUT=${3:-$OUT}; W=/tmp/gpuwork; mkdir -p $W $OUT
export PYTHONUNBUFFERED=1 CAVE_HOME=$W/home TOKENIZERS_PARALLELISM=false
PY=${PY:-python3}
if [ "$DEV" = cuda ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  rm -rf /tmp/site /tmp/gpuwork; mkdir -p $W; $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
  # the working tree's cave (not the wheel's copy): link the folders the install maps into cave/
  for d in runtimes:runtimes training:training benchmarks:benchmarks agents:agents bundled_skills:skills; do
    ln -sfn ../${d#*:} cave/${d%%:*}; done
fi
$PY -c "import torch, transformers, trl, datasets, deepspeed, cave, pyarrow; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'deepspeed', deepspeed.__version__, 'pyarrow', pyarrow.__version__)" 2>&1 | tail -2
$PY scripts/gpu/make_model.py .gpu/smol $W/smol || exit 1
$PY scripts/gpu/configs.py $W/smol $W $DEV $STEPS || exit 1
for run in ${RUNS:-plain zero2 zero3}; do
  echo "== cave train $run"; t0=$(date +%s)
  timeout ${TRAIN_LIMIT:-150} $PY -m cave train $W/$run.yaml > $OUT/train-$run.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 )) s"
  tail -3 $OUT/train-$run.log | cut -c1-300
  cp $W/$run/metrics.jsonl $OUT/$run.jsonl 2>/dev/null
done
for pn in ${PERF_SIZES-8x8 2x4}; do set -- ${pn%x*} ${pn#*x}
  echo "== perf.train $1x$2"
  timeout ${PERF_LIMIT:-150} $PY -m cave.benchmarks.perf.train --device $DEV --dtype $([ $DEV = cuda ] && echo bfloat16 || echo float32) --source $W/smol --prompts $1 --n $2 --max-tokens 32 --micro-batch 0 --out $OUT/perf$1x$2.json > $W/perf$1x$2.log 2>&1; echo "rc=$?"
  grep -A6 "^one RL iteration" $W/perf$1x$2.log; grep -E "Error|error:" $W/perf$1x$2.log | tail -2 | cut -c1-300
done
echo "== summary"; $PY scripts/gpu/summary.py $(for run in ${RUNS:-plain zero2 zero3}; do echo $W/$run; done)
