"""What ``cave run`` shows: a live rich display of each step (one agent or a team), --quiet and --json.

Everything that came from a kernel or a model goes through ``safe`` before it reaches the terminal.
"""

from __future__ import annotations

import json
import time
from typing import Any

from cave.agent import StepFinished
from cave.cli.common import err as _err
from cave.team.decisions import summarize
from cave.team.results import (
    Handoff,
    RoleEvent,
    RoleFinished,
    RoleStarted,
    TeamEvent,
    TeamFinished,
    TeamResult,
    TeamStarted,
)
from cave.terminal import safe

__all__ = ["JsonDisplay", "QuietDisplay", "RichDisplay", "TeamDisplay", "display_for"]


def display_for(args: Any, title: str, agent: Any = None) -> Any:
    """The display ``cave run``'s flags ask for."""
    if args.json:
        return JsonDisplay()
    if args.quiet:
        return QuietDisplay()
    return RichDisplay(title, agent)


class QuietDisplay:
    """--quiet: the answer on stdout, problems on stderr."""

    def on_event(self, ev: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def finish(self, outcome: Any) -> None:
        r = outcome.result
        if r.status not in ("success", "no_code"):
            why = r.trajectory.error or r.trajectory.meta.get("unverified")
            _err(f"run {r.run_id} ended with status {r.status}" + (f": {why}" if why else ""))
        for o in outcome.outputs:
            if o.error:
                _err(f"output {o.name}: {o.error}")
        print(_answer_text(r.answer))


class JsonDisplay(QuietDisplay):
    """--json: one JSON object (the run summary) on stdout."""

    def finish(self, outcome: Any) -> None:
        print(json.dumps(outcome.summary, default=repr))


def _answer_text(answer: Any, limit: int = 4000) -> str:
    from cave.prompts import truncate_middle

    text = answer if isinstance(answer, str) else repr(answer)
    return safe(truncate_middle(text, limit))


def shown(text: object) -> str:
    """Text from a model, a kernel or a file, ready for a rich markup string: control characters escaped (no
    terminal escape sequences) and rich markup escaped (a ``[red]`` in an answer is text, not style)."""
    from rich.markup import escape

    return escape(safe(text))


class RichDisplay:
    """Steps as they happen: the code, truncated output, tokens; a live progress line while the model writes."""

    def __init__(self, title: str, agent: Any = None) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.title = title
        self.live: Any = None
        self.buffer = ""
        self.step_index = 0
        self.max_steps = getattr(agent, "max_steps", 0)
        self.tokens = 0
        self.t0 = time.time()
        self.phase = "starting"
        if agent is not None:
            model = getattr(agent.llm, "model_name", None) or getattr(agent.llm, "name", type(agent.llm).__name__)
            self.console.print(
                f"[bold]cave[/bold] {shown(title)}  [dim]model={shown(model)} runtime={shown(agent.runtime.name)}[/dim]"
            )

    # live progress line (only on a terminal: logs and pipes get the step panels only)
    def _status(self) -> Any:
        from rich.spinner import Spinner
        from rich.text import Text

        tail = self.buffer[-400:].splitlines()[-4:]
        line = f" step {self.step_index + 1}/{self.max_steps} · {self.phase} · {self.tokens} tokens · {time.time() - self.t0:.0f}s"
        group = [Spinner("dots", text=Text(line, style="cyan"))]
        if tail and self.phase == "generating":
            group.append(Text(safe("\n".join("  " + t for t in tail)), style="dim"))
        from rich.console import Group

        return Group(*group)

    def _refresh(self) -> None:
        if not self.console.is_terminal:
            return
        if self.live is None:
            from rich.live import Live

            self.live = Live(self._status(), console=self.console, refresh_per_second=8, transient=True)
            self.live.start()
        else:
            self.live.update(self._status())

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def on_event(self, ev: Any) -> None:
        from cave import agent as a

        if isinstance(ev, a.RunStarted):
            verb = "resumed" if ev.resumed else "started"
            self.console.print(f"[dim]run {ev.trajectory.run_id} {verb}[/dim]")
            self.step_index = len([s for s in ev.trajectory.steps if s.kind == "action"])
        elif isinstance(ev, a.StepStarted):
            self.step_index, self.max_steps, self.buffer, self.phase = ev.index, ev.max_steps, "", "generating"
            self._refresh()
        elif isinstance(ev, a.TextChunk):
            self.buffer += ev.text
            self._refresh()
        elif isinstance(ev, a.CodeStarted):
            self.phase = f"running block {ev.block + 1}"
            self._refresh()
        elif isinstance(ev, a.StepFinished):
            self.tokens += ev.step.usage.total_tokens
            self._print_step(ev.step)
        elif isinstance(ev, a.Compacted):
            self._print(
                f"[yellow]context compacted ({ev.how}): {ev.tokens_before} -> {ev.tokens_after} tokens[/yellow]"
            )
        elif isinstance(ev, a.RunError):
            pass  # the result panel shows the run's error once (printing it here too said it twice)

    def _print(self, renderable: Any) -> None:
        self.console.print(renderable)

    def _print_step(self, step: Any) -> None:
        from rich.console import Group
        from rich.panel import Panel
        from rich.syntax import Syntax
        from rich.text import Text

        from cave.prompts import truncate_middle

        parts: list[Any] = []
        prose = _prose(step.completion)
        if prose:
            parts.append(Text(safe(truncate_middle(prose, 600)), style="italic"))
        if step.code:
            parts.append(
                Syntax(
                    safe(truncate_middle(step.code, 3000)),
                    "python",
                    theme="ansi_dark",
                    background_color="default",
                    word_wrap=True,  # long lines wrap instead of being cut at the terminal's width
                )
            )
        if step.observation:
            obs = step.observation.removeprefix("Observation:\n")
            style = "red" if step.execution is not None and not step.execution.ok else "green"
            parts.append(Text(safe(truncate_middle(obs, 1200)), style=style))
        u = step.usage
        cached = f" (cached {u.cached_tokens})" if u.cached_tokens else ""
        subtitle = f"{u.prompt_tokens}{cached} + {u.completion_tokens} tokens · llm {step.llm_duration:.1f}s · total {step.duration:.1f}s"
        title = f"step {step.index + 1}" + ("" if step.kind == "action" else f" · {step.kind}")
        self._print(
            Panel(
                Group(*parts) if parts else Text(""),
                title=title,
                subtitle=subtitle,
                title_align="left",
                subtitle_align="right",
            )
        )

    def finish(self, outcome: Any) -> None:
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        self.close()
        r = outcome.result
        color = "yellow" if r.status == "unverified" else "green" if outcome.ok else "red"
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        table.add_row("status", f"[{color}]{r.status}[/{color}]")
        table.add_row("answer", Text(_answer_text(r.answer, 1500)))
        if r.trajectory.error:
            table.add_row("error", Text(safe(r.trajectory.error)))
        if r.status == "unverified":  # an answer all the same, but nothing confirmed it: say why
            table.add_row("unverified", Text(safe(str(r.trajectory.meta.get("unverified", "")))))
        for o in outcome.outputs:
            table.add_row(f"output {o.name}", Text(safe(o.path)) if o.path else Text(safe(o.error), style="red"))
        u = r.usage
        table.add_row(
            "tokens", f"{u.prompt_tokens} prompt ({u.cached_tokens} cached) + {u.completion_tokens} completion"
        )
        table.add_row("steps", str(len(r.trajectory.steps)))
        if outcome.run_dir:
            table.add_row("run dir", Text(str(outcome.run_dir)))
        table.add_row("run id", r.run_id)
        self.console.print(Panel(table, title="result", title_align="left", border_style=color))


def _prose(text: str) -> str:
    """A reply without its code blocks (the reasoning part)."""
    import re

    return re.sub(r"```.*?(```|\Z)", "", text, flags=re.S).strip()


# -- teams ---------------------------------------------------------------------------------------
ROLE_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")


class TeamDisplay:
    """Prints each role's steps as they happen, tagged and colored by role (used by ``cave run``)."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console()
        self._colors: dict[str, str] = {}
        self._steps: dict[str, int] = {}

    def color(self, role: str) -> str:
        return self._colors.setdefault(role, ROLE_COLORS[len(self._colors) % len(ROLE_COLORS)])

    def __call__(self, ev: TeamEvent) -> None:
        from rich.syntax import Syntax

        c = self.console
        if isinstance(ev, TeamStarted):
            c.rule(f"team run {ev.trajectory.team_run_id} · {ev.trajectory.meta.get('pattern')}")
        elif isinstance(ev, RoleStarted):
            col = self.color(ev.role)
            first = ev.task.strip().splitlines()[0] if ev.task.strip() else ""
            c.print(f"[bold {col}]▶ {ev.role}[/] turn {ev.call}: [dim]{shown(first[:100])}[/]")
        elif isinstance(ev, RoleEvent) and isinstance(ev.event, StepFinished):
            step, col = ev.event.step, self.color(ev.role)
            self._steps[ev.role] = n = self._steps.get(ev.role, 0) + 1  # numbered per role, from 1
            head = f"[{col}]{ev.role}[/] step {n} ({step.kind}, {step.usage.total_tokens} tok, {step.duration:.2f}s)"
            c.print(head)
            if step.code:
                c.print(Syntax(safe(step.code), "python", theme="ansi_dark", line_numbers=False, word_wrap=True))
            elif step.completion:
                c.print(f"  [dim]{shown(step.completion.strip()[:300])}[/]")
            if step.observation:
                c.print(f"  [dim]{shown(step.observation.strip()[:400])}[/]")
        elif isinstance(ev, Handoff):
            c.print(f"  [bold]⇢ {ev.slot}[/]: {ev.source} → {ev.target} ({ev.seconds * 1000:.1f} ms)")
        elif isinstance(ev, RoleFinished):
            r, col = ev.result, self.color(ev.result.role)
            decided = r.verdict or r.route
            extra = (
                f" → {shown(decided)}"
                if decided
                else (f" [red]({shown(r.decision_error)})[/]" if r.decision_error else "")
            )
            c.print(f"[{col}]■ {r.role}[/] turn {r.call}: {r.status}{extra}")
        elif isinstance(ev, TeamFinished):
            self.summary(ev.result)

    def summary(self, result: TeamResult) -> None:
        from rich.table import Table

        t = Table(title=f"team run {result.team_run_id}: {result.status}")
        for col in ("role", "turns", "steps", "tokens", "seconds"):
            t.add_column(col, justify="right" if col != "role" else "left")
        traj = result.trajectory
        for role in traj.meta.get("roles", []):
            steps = traj.by_role(role)
            calls = [c for c in traj.meta.get("calls", []) if c["role"] == role]
            t.add_row(
                role,
                str(len(calls)),
                str(len(steps)),
                str(sum(s.usage.total_tokens for s in steps)),
                f"{sum(c['duration'] for c in calls):.2f}",
            )
        self.console.print(t)
        self.console.print(
            f"answer: {shown(summarize(result.answer, 500))}"
            + (f"\n[red]error: {shown(traj.error)}[/]" if traj.error else "")
        )
