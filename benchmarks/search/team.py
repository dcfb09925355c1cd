"""Dr. MAS's search team as a custom pattern: a router picks Search or Answer, step by step, up to 4 steps.

    pattern: {name: custom, function: "cave.benchmarks.search.team:run", options: {max_hops: 4}}

Why a custom pattern and not ``router``: the search role needs ``search`` in its runtime in *every* run, including
the trainer's rollouts, which pass no inputs. This function installs it into the search role's runtime (and only
there) before the first turn, gives the router ``route(role, message)`` among search/answer, and runs the hops:

- router turn -> ``route("search", "...")``: the search role looks up (``search(query, k) -> [Hit]``) and reports;
- ``route("answer", "...")``: the answer role calls final_answer(answer) and the episode ends with that object;
- a router turn without a valid route goes to search (answer at the last hop), recorded in meta["missing_routes"];
  its call already carries the invalid-format flag (the trainer's 0.01 penalty);
- at the last hop the answer role answers whatever the router chose, so every episode ends with an answer.

The router role must not declare ``output: route`` here (that is the built-in router pattern's contract, whose
choices come from the pattern): it ends its turn through the ``route`` this function injects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cave.team.decisions import Route, make_route, parse_route, summarize
from cave.team.patterns import Outcome

if TYPE_CHECKING:
    from cave.team.episode import TeamRun

ROUTER_PROMPT = (
    "Question: {task}\n\nWhat the team found so far:\n{history}\n\n"
    'If the facts above answer the question, call route("answer", message="the answer is ..."). '
    'Otherwise call route("search", message="<what to look up>").'
)
ROLE_PROMPT = "Question: {task}\n\nInstruction from the router: {message}\n\nWhat the team found so far:\n{history}"
DEFAULTS = {"router": "router", "search": "search", "answer": "answer", "max_hops": 4}


def install_search(runtime: Any) -> None:
    """Give ``runtime`` the live ``search`` function and the ``Hit`` type.

    In-process: the function itself. A kernel or sandbox gets it by reference (module and name): it imports
    cave.benchmarks.search.index there and opens the same cached index file, so Hits are live objects in the
    kernel too and nothing crosses the process boundary per call.
    """
    from cave.benchmarks.search.index import Hit, search

    runtime.inject_function(search, name="search")
    runtime.inject("Hit", Hit, description="a search result: .title, .text, .score")


async def run(team: TeamRun, task: str) -> Outcome:
    o = {**DEFAULTS, **team.options}
    router, searcher, answerer, max_hops = o["router"], o["search"], o["answer"], int(o["max_hops"])
    choices = [searcher, answerer]
    install_search(await team.runtime(searcher))
    descriptions = {c: team.team.roles[c].description for c in choices if c in team.team.roles}
    (await team.runtime(router)).inject_function(
        make_route(choices, descriptions), name="route", description="end your turn: who acts next"
    )
    history: list[str] = []
    last: Any = None
    for hop in range(1, max_hops + 1):
        team.trajectory.meta["hops"] = hop
        shown = "\n".join(history) or "(nothing yet)"
        decided = await team.call(router, ROUTER_PROMPT.format(task=task, history=shown), fresh=True)
        route = parse_route(decided.answer, choices) if decided.ok else None
        if route is None:
            fallback = answerer if hop == max_hops else searcher
            team.trajectory.meta.setdefault("missing_routes", []).append(
                {"hop": hop, "why": decided.error or f"not a route: {summarize(decided.answer, 120)}", "to": fallback}
            )
            route = Route(fallback, task)
        if hop == max_hops and route.role != answerer:
            route = Route(answerer, "give the final answer now")
        team.trajectory.meta.setdefault("routes", []).append({"hop": hop, "role": route.role, "message": route.message})
        text = ROLE_PROMPT.format(task=task, message=route.message or "(none)", history=shown)
        result = await team.call(route.role, text, sender=router, fresh=True)
        outcome = summarize(result.answer, 600) if result.ok else f"(failed: {result.status})"
        history.append(f"{hop}. {route.role} ({route.message}): {outcome}")
        if result.ok:
            last = result.answer
            if route.role == answerer:
                return Outcome(result.answer, "success")
    return Outcome(last if last is not None else None, "max_hops")
