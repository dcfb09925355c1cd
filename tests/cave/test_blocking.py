"""``run_blocking``: the blocking edge of ``Team.run`` runs ``arun`` to the end, and refuses inside a running loop."""

import asyncio
import doctest

import pytest

import cave.blocking
from cave.blocking import run_blocking


def test_doctests():
    assert doctest.testmod(cave.blocking).failed == 0


def test_inside_a_running_loop_it_says_to_await_arun():
    async def arun(task: str) -> str:
        return task

    async def main() -> None:
        with pytest.raises(
            RuntimeError, match=r"Team\.run\(\) was called inside .* `await team\.arun\(\.\.\.\)` there"
        ):
            run_blocking("Team", arun, "t")

    asyncio.run(main())
