"""argv[1]'s architecture (an HF dir: config + tokenizer) with random weights (seeded), bf16, saved at argv[2]."""

import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
cfg = AutoConfig.from_pretrained(src)
model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
model.save_pretrained(dst)
for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    shutil.copy(src / f, dst / f)
print("random-weights model:", sum(p.numel() for p in model.parameters()), "parameters at", dst)
