"""One line per train run from its metrics.jsonl: steps, mean step s, rollout/update tokens/s, grad norms."""

import json
import sys
from pathlib import Path

for run in sys.argv[1:]:
    f = Path(run) / "metrics.jsonl"
    if not f.exists():
        print(f"{Path(run).name:6} no metrics.jsonl")
        continue
    rows = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "step_s" in r]
    if not rows:
        print(f"{Path(run).name:6} no steps")
        continue
    later = rows[1:] or rows  # the first step includes warm-up

    def mean(k: str, later: list = later) -> float:
        return sum(r.get(k, 0) for r in later) / len(later)

    norms = [r.get("grad_norm", r.get("grad_norms/solver")) for r in rows]
    print(
        f"{Path(run).name:6} steps {len(rows):3d}  step_s {mean('step_s'):6.2f}  rollout tok/s "
        f"{mean('rollout_tokens_per_s'):9.0f}  update tok/s {mean('update_tokens_per_s'):9.0f}  "
        f"loss {rows[-1].get('loss', 'n/a')}  first/last grad {str(norms[0])[:12]} / {str(norms[-1])[:12]}"
    )
