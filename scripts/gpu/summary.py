"""One line per train run from its metrics.jsonl: steps, mean step s, rollout/update tokens/s, grad norms; then
each step's per-role pre-clip gradient norms (a role's own on a shared model, also under ZeRO-2)."""

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
    roles = sorted(k.split("/", 1)[1] for k in rows[0] if k.startswith("grad_norm/"))
    for r in rows:
        per_role = "  ".join(f"{role} {r.get('grad_norm/' + role, float('nan')):.4g}" for role in roles)
        print(f"  step {r['step']:3d}  {r['step_s']:6.2f} s  rollout {r['rollout_s']:6.2f} s  grad {per_role}")
