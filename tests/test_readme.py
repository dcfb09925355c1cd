"""The README's two set-up commands are the project's contract with new users; CI must run the second one."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    blocks, inside, cur = [], False, []
    for line in text.splitlines():
        if line.strip().startswith("```bash"):
            inside, cur = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(cur).strip())
        elif inside:
            cur.append(line)
    return blocks


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = _bash_blocks(readme)[1]
    # CI creates and activates the venv itself; the rest of the command must be identical.
    tail = test_cmd.split(". .venv/bin/activate && ", 1)[1]
    assert tail in ci, f"CI does not run the README's test command {tail!r}"


def test_first_command_runs_a_shipped_example():
    readme = (ROOT / "README.md").read_text()
    first = _bash_blocks(readme)[0]
    task = first.split("cave run ", 1)[1].split()[0]
    assert (ROOT / task).is_file(), f"the README's first command runs {task}, which does not exist"


@pytest.mark.model
@pytest.mark.slow
def test_the_first_command_ends_in_a_verified_success(tmp_path):
    """`cave run` on the README's first task, on the embedded model: success means its checks passed."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("llama_cpp", reason="the embedded model needs the [local] extra")
    readme = (ROOT / "README.md").read_text()
    task = _bash_blocks(readme)[0].split("cave run ", 1)[1].split()[0]
    out = subprocess.run(
        [sys.executable, "-m", "cave", "run", str(ROOT / task), "--json", "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=900, env={**os.environ, "CAVE_RUNS": str(tmp_path)},
    )  # fmt: skip
    summary = json.loads(out.stdout)
    assert out.returncode == 0 and summary["status"] == "success", out.stdout[-2000:] + out.stderr[-2000:]
    assert summary["checks"]["passed"], "the README's example must carry checks, so that success is verified"


@pytest.mark.model
@pytest.mark.slow
def test_the_sdk_snippet_runs_both_turns(monkeypatch):
    """The README's Python snippet, as written, on the embedded model: two turns, the second on the first's data."""
    import re

    pytest.importorskip("llama_cpp", reason="the embedded model needs the [local] extra")
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"## Use it from Python\n\n```python\n(.*?)\n```\n", readme, re.S).group(1)
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)
    assert ns["result"].status == "success" and ns["second"].status == "success"
    sales = ns["agent"].runtime.retrieve("sales")
    top = (sales.units * sales.unit_price).groupby(sales.region).sum().idxmax()
    assert ns["second"].answer == top
