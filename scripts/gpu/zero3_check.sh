#!/bin/bash
# The ZeRO-3 gather / ZeRO-2 per-role norm check: new code (.gpu/tree, branch gpu-zero3) ZeRO-3 and ZeRO-2, then the
# old code (.gpu/old: main's training/) ZeRO-3 on the same configs, same device. Run from the repository root.
# Layout (ignored folders the run tool carries): .whl/ (wheels, see run.sh), .gpu/smol/ (SmolLM2's config and tokenizer),
# .gpu/tree/ (git archive of the branch under test: cave training runtimes agents skills scripts pyproject.toml),
# .gpu/old/ (the same with training/ of the baseline commit). Usage: bash .gpu/device.sh (OUT set; STEPS, NEW_LIMIT, OLD_LIMIT).
R=$PWD; export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
cd $R/.gpu/tree && ln -sfn ../../.whl .whl && mkdir -p .gpu && ln -sfn ../../smol .gpu/smol || exit 1
RUNS="zero3 zero2" PERF_SIZES= TRAIN_LIMIT=${NEW_LIMIT:-110} bash scripts/gpu/run.sh cuda ${STEPS:-8} $OUT/after
(cd $R/.gpu/tree && PYTHONPATH=/tmp/site python3 -c "import cave.training.deepspeed_update as d; print('new code:', d.__file__, hasattr(d.DeepSpeedUpdate, 'for_generation'))")
echo "== old code (main's training/): cave train zero3"
cd $R/.gpu/old && for d in runtimes:runtimes training:training benchmarks:benchmarks agents:agents bundled_skills:skills; do
  ln -sfn ../${d#*:} cave/${d%%:*}; done
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH CAVE_HOME=/tmp/gpuwork/home
sed -e 's#/tmp/gpuwork/zero3#/tmp/gpuwork/zero3old#' /tmp/gpuwork/zero3.yaml > /tmp/gpuwork/zero3old.yaml
python3 -c "import cave.training.deepspeed_update as d; print('old code:', d.__file__, hasattr(d.DeepSpeedUpdate, 'for_generation'))"
mkdir -p $OUT/before; t0=$(date +%s)
timeout ${OLD_LIMIT:-100} python3 -m cave train /tmp/gpuwork/zero3old.yaml > $OUT/before/train-zero3.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 )) s"
cp /tmp/gpuwork/zero3old/metrics.jsonl $OUT/before/zero3.jsonl 2>/dev/null
python3 $R/.gpu/tree/scripts/gpu/summary.py /tmp/gpuwork/zero3old
nvidia-smi --query-gpu=name --format=csv,noheader
