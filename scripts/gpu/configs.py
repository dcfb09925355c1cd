"""Write the GPU train configs: plain AdamW, DeepSpeed ZeRO-2, ZeRO-3 (argv: model dir, out dir, device, steps)."""

import sys

import yaml

model, out, device, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
base = yaml.safe_load(open("training/configs/math_smollm2.yaml"))
base["models"] = {
    "base": {
        "source": model,
        "dtype": "bfloat16" if device == "cuda" else "float32",
        "rollout": {"engine": "transformers"},
    }
}
for role in ("solver", "verifier"):
    base["agents"][role].update(lr=1.0e-5, micro_batch_size=8)
base["data"]["prompts"] += [
    {"question": "What is 144 / 12?", "answer": 12},
    {"question": "A book costs 7.5 dollars. How much do 4 books cost?", "answer": 30},
]
small = device == "cpu"  # a dry run here
base.update(
    group_size=2 if small else 4,
    batch_size=2 if small else 4,
    steps=steps,
    max_tokens=16 if small else 48,
    checkpoint_every=5,
    device=device,
    threads=None,
)
base.pop("threads")
for name, ds in (("plain", None), ("zero2", {"zero_stage": 2}), ("zero3", {"zero_stage": 3})):
    cfg = {**base, "output_dir": f"{out}/{name}", "models": {"base": {**base["models"]["base"]}}}
    if ds:
        cfg["models"]["base"]["deepspeed"] = ds
    yaml.safe_dump(cfg, open(f"{out}/{name}.yaml", "w"), sort_keys=False)
    print("wrote", f"{out}/{name}.yaml")
