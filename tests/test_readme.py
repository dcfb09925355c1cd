"""The README's two set-up commands are the project's contract with new users; CI must run the second one."""

from pathlib import Path

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
