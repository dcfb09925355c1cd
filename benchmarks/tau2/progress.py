"""A rich progress display for tau2 runs: one bar per (agent, domain), naming the task running now.

    with TaskProgress(quiet=args.quiet) as progress:
        run_domain(..., on_start=progress.starter("code", "mock"), on_result=progress.done)

Each bar shows task i/n, the trial, the time on the current task and on the domain, and the reward so far
(mean over the tasks that ran, errors counted apart). ``quiet=True`` shows nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.text import Text


class _TaskElapsed(ProgressColumn):
    """Seconds on the task running now (the row's field ``started``)."""

    def render(self, task: Any) -> Text:
        started = task.fields.get("started")
        if started is None:
            return Text("")
        return Text(f"task {time.monotonic() - started:4.0f}s", style="progress.elapsed")


class TaskProgress:
    def __init__(self, *, quiet: bool = False, console: Console | None = None) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _TaskElapsed(),
            TextColumn("{task.fields[score]}"),
            console=console,
            disable=quiet,
            refresh_per_second=2,  # the machine's cores belong to the model
        )
        self._row: Any = None
        self._label = ""
        self._rewards: list[float] = []
        self._errors = 0

    def __enter__(self) -> TaskProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._finish_row()
        self.progress.stop()

    def starter(self, agent: str, domain: str) -> Callable[[str, int, int, int], None]:
        """The ``on_start`` callback of ``run_domain`` for one (agent, domain): opens its bar."""
        self._finish_row()
        self._label, self._rewards, self._errors = f"{agent} {domain}", [], 0
        self._row = None

        def on_start(task_id: str, trial: int, index: int, total: int) -> None:
            if self._row is None:
                self._row = self.progress.add_task(self._label, total=total, score="", started=None)
            desc = f"{self._label} · task {index}/{total} {task_id} · trial {trial}"
            self.progress.update(self._row, description=desc, started=time.monotonic())

        return on_start

    def done(self, run: Any) -> None:
        """The ``on_result`` callback: advance the bar, update the reward so far."""
        if run.error:
            self._errors += 1
        else:
            self._rewards.append(run.reward)
        if self._row is not None:
            self.progress.update(self._row, advance=1, score=self.score())

    def score(self) -> str:
        mean = (
            f"reward {sum(self._rewards) / len(self._rewards):.2f} over {len(self._rewards)}" if self._rewards else ""
        )
        errors = f"{self._errors} error{'s' * (self._errors != 1)}" if self._errors else ""
        return " · ".join(p for p in (mean, errors) if p)

    def _finish_row(self) -> None:
        if self._row is not None:
            self.progress.update(self._row, description=f"{self._label} done", started=None)
            self._row = None


def run_domains(
    agents: list[str],
    domains: list[str],
    llm: Any,
    user_llm: Any,
    *,
    quiet: bool = False,
    on_result: Callable[[Any], None] | None = None,
    **kwargs: Any,
) -> dict[str, list[Any]]:
    """``run_domain`` for each agent and domain under one progress display: ``{"agent/domain": runs}``.
    ``on_result(run)`` after each task; ``kwargs`` go to ``run_domain`` (limit, trials, timeout, ...)."""
    from cave.benchmarks.tau2.run import run_domain

    out: dict[str, list[Any]] = {}
    with TaskProgress(quiet=quiet) as progress:

        def done(run: Any) -> None:
            progress.done(run)
            if on_result is not None:
                on_result(run)

        for agent in agents:
            for domain in domains:
                on_start = progress.starter(agent, domain)
                out[f"{agent}/{domain}"] = run_domain(
                    domain, agent, llm, user_llm, on_start=on_start, on_result=done, **kwargs
                )
    return out
