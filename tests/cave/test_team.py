"""Teams with Scripted backends (determinism) on real in-process runtimes: patterns, hand-off, faults, records."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from cave.cli.run import team_main
from cave.llm.base import LLM, Completion, LLMError, Scripted, Usage
from cave.team import (
    PATTERNS,
    BoundedLLM,
    Handoff,
    Outcome,
    Route,
    Team,
    TeamError,
    Verdict,
    arun_team_task,
    load_role,
    load_team,
    load_team_task,
    parse_route,
    parse_verdict,
    register_pattern,
)


def code(body: str) -> str:
    return f"I will do it.\n```python\n{body}\n```"


def last_user(messages: list[dict]) -> str:
    return [m for m in messages if m["role"] == "user"][-1]["content"]


def loop_team(solver, verifier, **pattern) -> Team:
    return Team.build(
        [{"use": "solver", "backend": "s"}, {"use": "verifier", "backend": "v"}],
        {"name": "loop", **pattern},
        backends={"s": Scripted(solver), "v": Scripted(verifier)},
    )


# -- the loop pattern ---------------------------------------------------------------------------------
def test_loop_rejects_then_approves_and_every_step_is_in_one_tagged_trajectory():
    def solver(msgs):
        return code("final_answer(4)") if "rejected" in last_user(msgs) else code("final_answer(2 + 1)")

    def verifier(msgs):
        ok = "answer:\n4" in last_user(msgs)
        return code(f"verdict(approve={ok}, feedback='2 + 2 is 4')")

    result = loop_team(solver, verifier, max_rounds=3).run("What is 2 + 2?", seed=1)
    traj = result.trajectory
    assert (result.status, result.answer) == ("success", 4)
    assert [s.role for s in traj.steps] == ["solver", "verifier", "solver", "verifier"]
    assert [s.index for s in traj.steps] == [0, 1, 2, 3]
    assert {s.team_run_id for s in traj.steps} == {traj.team_run_id} == {result.team_run_id}
    assert {s.run_id for s in traj.steps} == {traj.run_id}  # one record: the store files every step under it
    assert [s.kind for s in traj.by_role("verifier")] == ["verdict", "verdict"]
    assert traj.meta["verdicts"] == [
        {"round": 1, "approve": False, "feedback": "2 + 2 is 4"},
        {"round": 2, "approve": True, "feedback": "2 + 2 is 4"},
    ]
    # the worker read the critic's feedback in round 2 (text message between roles)
    assert "2 + 2 is 4" in traj.meta["messages"][2]["text"]
    assert [(m["from"], m["to"]) for m in traj.meta["messages"]] == [
        ("user", "solver"),
        ("solver", "verifier"),
        ("verifier", "solver"),
        ("solver", "verifier"),
    ]


def test_loop_stops_at_max_rounds_with_the_last_answer():
    result = loop_team(
        lambda m: code("final_answer(3)"), lambda m: code("verdict(approve=False, feedback='no')"), max_rounds=2
    ).run("What is 2 + 2?")
    assert (result.status, result.answer) == ("max_rounds", 3)
    calls = result.trajectory.meta["calls"]
    assert [c["role"] for c in calls] == ["solver", "verifier", "solver", "verifier"]
    assert result.trajectory.meta["rounds"] == 2


def test_the_format_of_every_call_is_judged_not_only_the_last():
    # The solver's first call is valid code that does not answer yet, its second has a SyntaxError (an
    # intermediate call: it ends nothing, but its format is invalid), its third answers.
    solver = [code("x = 2 + 2"), code("x = (1 +"), code("final_answer(x)")]
    result = loop_team(solver, [code("verdict(approve=True)")], max_rounds=1).run("What is 2 + 2?")
    assert (result.status, result.answer) == ("success", 4)
    assert [s.meta["format_ok"] for s in result.trajectory.by_role("solver")] == [True, False, True]
    assert [s.meta["format_ok"] for s in result.trajectory.by_role("verifier")] == [True]


def test_a_text_roles_call_is_valid_when_it_says_something():
    team = Team.build(
        [{"name": "writer", "backend": "w", "output": {"kind": "text"}}],
        {"name": "sequential"},
        backends={"w": Scripted(["A short report."])},
    )
    step = team.run("Write a report.").trajectory.steps[0]
    assert step.meta["format_ok"] is True


def test_a_timed_out_turn_penalizes_its_last_call():
    class Slow(LLM):
        calls = 0

        async def _complete(self, messages, **kwargs):
            type(self).calls += 1
            if type(self).calls > 1:
                await asyncio.sleep(30)
            return Completion(code("x = 1"), Usage(1, 1, 2))

    team = Team.build(
        [{"name": "w", "backend": "w", "timeout_s": 1.0}],
        {"name": "sequential"},
        backends={"w": Slow()},
    )
    result = team.run("go")
    assert result.trajectory.meta["calls"][0]["status"] == "timeout"
    assert result.trajectory.steps[-1].meta["format_ok"] is False


@pytest.mark.parametrize(
    ("policy", "status"),
    [("approve", "success"), ("reject", "max_rounds"), ("fail", "error")],
)
def test_missing_verdict_meaning_is_configurable(policy, status):
    # The verifier answers in prose: no verdict() call, so there is no structured decision to read.
    result = loop_team(
        lambda m: code("final_answer(4)"), lambda m: "Looks right to me, approve.", on_missing_verdict=policy
    ).run("What is 2 + 2?")
    assert result.status == status
    last_verifier = result.trajectory.by_role("verifier")[-1]
    assert last_verifier.meta["format_ok"] is False  # the trainer's invalid-format penalty reads this
    why = result.trajectory.meta["missing_verdicts"][0]["why"]
    assert "no_code" in why


def test_malformed_verdict_is_missing_and_wrong_types_are_refused_in_the_runtime():
    # final_answer("yes") is not a verdict; verdict(approve="yes") raises in the runtime and the agent retries.
    replies = iter([code("verdict(approve='yes')"), code("final_answer('yes')")])
    result = loop_team(lambda m: code("final_answer(4)"), lambda m: next(replies), on_missing_verdict="fail").run("q")
    assert result.status == "error"
    assert "malformed" in result.trajectory.error and "'yes'" in result.trajectory.error
    first = result.trajectory.by_role("verifier")[0]
    assert "must be True or False" in first.observation


def test_verdict_parsing_accepts_structured_values_only():
    assert parse_verdict(Verdict(True)) == Verdict(True)
    assert parse_verdict({"approve": False, "feedback": "x"}) == Verdict(False, "x")
    assert parse_verdict({"approve": "APPROVE"}) == Verdict(True)
    assert parse_verdict(False) == Verdict(False)
    for text in ("approve", "Approved!", None, 1, {"ok": True}):
        assert parse_verdict(text) is None
    assert parse_route(Route("answer", "go"), ["search", "answer"]) == Route("answer", "go")
    assert parse_route({"role": "search"}, ["search"]) == Route("search")
    assert parse_route("answer", ["search", "answer"]) == Route("answer")
    assert parse_route("let's search", ["search"]) is None
    assert parse_route("other", ["search"]) is None


# -- the router pattern -------------------------------------------------------------------------------
def search_team(router, **pattern) -> tuple[Team, Scripted, Scripted]:
    search = Scripted(lambda m: code("final_answer('the tower was completed in 1889')"))
    answer = Scripted(lambda m: code("final_answer('1889')"))
    team = Team.build(
        [
            {"use": "router", "backend": "r"},
            {"use": "search", "backend": "s"},
            {"use": "answer", "backend": "a"},
        ],
        {"name": "router", "finish": ["answer"], **pattern},
        backends={"r": Scripted(router), "s": search, "a": answer},
    )
    return team, search, answer


def test_router_routes_by_structured_choice_and_finishes_on_the_answer_role():
    def router(msgs):
        seen = last_user(msgs)
        return code('route("answer", message="say the year")') if "1889" in seen else code('route("search", "find it")')

    team, search, answer = search_team(router)
    result = team.run("When was the Eiffel Tower completed?")
    assert (result.status, result.answer) == ("success", "1889")
    assert [r["role"] for r in result.trajectory.meta["routes"]] == ["search", "answer"]
    assert [s.role for s in result.trajectory.steps] == ["router", "search", "router", "answer"]
    assert [s.kind for s in result.trajectory.by_role("router")] == ["route", "route"]
    assert "find it" in last_user(search.calls[0])  # the router's message reached the chosen role
    # the router's runtime knows its choices: the function's description lists them
    assert "'search'" in team.instructions("router") or "search (" in team.instructions("router")


def test_router_refuses_an_unknown_choice_inside_the_runtime_and_hop_limit_holds():
    replies = iter([code('route("google")'), code('route("search")')] + [code('route("search")')] * 10)
    team, search, _ = search_team(lambda m: next(replies), max_hops=3)
    result = team.run("q")
    assert result.status == "max_hops"
    assert result.trajectory.meta["hops"] == 3
    first = result.trajectory.by_role("router")[0]
    assert "unknown role" in first.observation and "'search'" in first.observation
    assert len(search.calls) == 3


def test_router_fallback_and_missing_route_policy():
    team, _, answer = search_team(
        lambda m: "I think we should search.", on_missing_route="search", max_hops=2, fallback="answer"
    )
    result = team.run("q")
    assert (result.status, result.answer) == ("success", "1889")
    assert len(result.trajectory.meta["missing_routes"]) == 2
    assert len(answer.calls) == 1  # the fallback role was called once at the hop limit

    team, _, _ = search_team(lambda m: "no idea")
    result = team.run("q")
    assert result.status == "error" and "chose no valid role" in result.trajectory.error


def test_router_may_finish_itself_when_allowed():
    team = Team.build(
        [{"use": "router", "backend": "r"}, {"use": "search", "backend": "r"}],
        {"name": "router", "allow_finish": True},
        backends={"r": Scripted(lambda m: code('route("finish", message="42")'))},
    )
    result = team.run("q")
    assert (result.status, result.answer) == ("success", "42")


# -- sequential and custom ----------------------------------------------------------------------------
def test_sequential_pipeline_passes_answers_and_a_dataframe_without_printing_it():
    planner = Scripted(["1. group sales by region\n2. sum revenue"])
    coder = Scripted(
        [code("by_region = sales.groupby('region', as_index=False)['revenue'].sum()\nfinal_answer(by_region)")]
    )
    reviewer = Scripted([code("verdict(approve=bool(by_region['revenue'].sum() == sales['revenue'].sum()))")])
    team = Team.build(
        [
            {"use": "planner", "backend": "p"},
            {"use": "coder", "backend": "c", "output": {"publishes": {"by_region": "revenue per region"}}},
            {"use": "reviewer", "backend": "r"},
        ],
        "sequential",
        backends={"p": planner, "c": coder, "r": reviewer},
    )
    sales = pd.DataFrame({"region": ["n", "s", "n"], "revenue": [1.0, 2.0, 3.0]})
    result = team.run("Revenue by region", inputs={"sales": sales}, keep_runtimes=True)
    try:
        assert result.status == "success"
        assert list(result.answer["revenue"]) == [4.0, 2.0]
        assert "group sales by region" in last_user(coder.calls[0])  # the plan reached the coder as text
        # zero-copy hand-off: the reviewer's runtime holds the very object the coder made
        made = result.runtimes["coder"].retrieve("by_region")
        assert result.runtimes["reviewer"].retrieve("by_region") is made
        assert result.slots["by_region"] is made
        assert result.trajectory.meta["verdicts"][0]["approve"] is True
        assert result.trajectory.meta["slots"]["by_region"]["owner"] == "coder"
        # the DataFrame's rows never travelled through the reviewer's messages (its system prompt describes the
        # frame it was handed, with a bounded preview of its first rows, as for any given DataFrame)
        assert "4.0" not in " ".join(str(m["content"]) for m in reviewer.calls[0][1:])
    finally:
        result.close()


def test_publish_from_code_reaches_only_readers_and_handoff_events_are_emitted():
    a = Scripted([code("publish('table', {'x': [1, 2]}, 'a small table')\nfinal_answer('done')")])
    b = Scripted([code("final_answer(table['x'][1])")])
    c = Scripted([code("final_answer('table' in globals())")])
    team = Team.build(
        [{"name": "a", "backend": "a"}, {"name": "b", "backend": "b"}, {"name": "c", "backend": "c", "reads": []}],
        "sequential",
        backends={"a": a, "b": b, "c": c},
    )
    events = []
    result = team.run("go", on_event=events.append)
    assert [c["answer"] for c in result.trajectory.meta["calls"]] == ["done", "2", "False"]
    handoffs = [e for e in events if isinstance(e, Handoff)]
    assert [(h.slot, h.source, h.target) for h in handoffs] == [("table", "a", "b")]
    assert "handed over by a: a small table" in str(b.calls[0][0]["content"])  # described in b's system prompt


def test_shared_runtime_roles_see_each_others_variables():
    team = Team.build(
        [
            {"name": "a", "backend": "x", "runtime": "shared"},
            {"name": "b", "backend": "y", "runtime": "shared"},
        ],
        "sequential",
        backends={"x": Scripted([code("z = 41\nfinal_answer(z)")]), "y": Scripted([code("final_answer(z + 1)")])},
    )
    assert team.run("go").answer == 42


async def custom_run(team, task):
    first = await team.call("a", task)
    second = await team.call("b", f"{task} (a said {first.answer})")
    return Outcome(second.answer, "success")


async def custom_raises(team, task):
    await team.call("a", task)
    raise ValueError("the custom pattern broke")


def test_custom_pattern_by_import_path_and_its_exceptions_name_role_and_step():
    backends = {"x": Scripted(lambda m: code("final_answer(1)")), "y": Scripted(lambda m: code("final_answer(2)"))}
    roles = [{"name": "a", "backend": "x"}, {"name": "b", "backend": "y"}]
    team = Team.build(roles, {"name": "custom", "function": f"{__name__}:custom_run"}, backends=backends)
    assert team.run("go").answer == 2

    team = Team.build(roles, {"name": "custom", "function": f"{__name__}:custom_raises"}, backends=backends)
    result = team.run("go")
    assert result.status == "error"
    assert "ValueError: the custom pattern broke" in result.trajectory.error
    assert "last role: 'a' turn 1" in result.trajectory.error and "last step: 0" in result.trajectory.error
    assert "custom_raises" in result.trajectory.meta["traceback"]


def test_new_patterns_register_by_decorator():
    @register_pattern("first-only")
    class FirstOnly(PATTERNS["sequential"]):
        async def run(self, team, task):
            r = await team.call(team.role_names[0], task)
            return Outcome(r.answer)

    try:
        team = Team.build(
            [{"name": "a", "backend": "x"}], "first-only", backends={"x": Scripted([code("final_answer(7)")])}
        )
        assert team.run("go").answer == 7
    finally:
        PATTERNS.remove("first-only")


# -- backends: sharing, sampling, bounds --------------------------------------------------------------
class Recording(LLM):
    """Records the sampling arguments of each call (what Scripted does not keep)."""

    def __init__(self, reply: str) -> None:
        self.reply, self.kwargs = reply, []

    async def _complete(self, messages, **kwargs):
        self.kwargs.append(kwargs)
        await asyncio.sleep(0.01)
        return Completion(self.reply, Usage(1, 1, 2))


def test_roles_share_one_backend_instance_or_use_different_ones_with_their_own_sampling():
    shared = Recording(code("final_answer(1)"))
    team = Team.build(
        [
            {"name": "a", "backend": "one", "sampling": {"temperature": 0.7, "max_tokens": 64}},
            {"name": "b", "backend": "one", "sampling": {"temperature": 0.1, "seed": 5}},
            {"name": "c", "backend": "two"},
        ],
        "sequential",
        backends={"one": shared, "two": Scripted([code("final_answer(3)")])},
        seed=11,
    )
    assert team.backend("one") is team.backend(team.backend_key("b"))  # one model instance for both roles
    assert team.backend("one").inner is shared and team.backend("two").inner is not shared
    team.run("go")
    a, b = shared.kwargs
    assert (a["temperature"], a["max_tokens"]) == (0.7, 64)
    assert (b["temperature"], b["seed"]) == (0.1, 5)
    assert a["seed"] is not None and a["seed"] != b["seed"]  # derived from the team seed, per role


async def test_bounded_backend_never_exceeds_its_in_flight_limit():
    inner = Recording(code("final_answer(1)"))
    team = Team.build([{"name": "a", "backend": "m"}], "sequential", backends={"m": inner}, max_in_flight=3)
    results = await team.arun_many(["go"] * 20)
    assert all(r.ok for r in results)
    bounded = team.backend("m")
    assert isinstance(bounded, BoundedLLM)
    assert bounded.peak == 3 and bounded.in_flight == 0


def test_same_seeds_give_the_same_trajectory():
    def run(seed):
        team = loop_team(lambda m: code("final_answer(4)"), lambda m: code("verdict(approve=True)"))
        r = team.run("q", seed=seed)
        return [(s.role, s.kind, s.completion, s.observation, s.messages) for s in r.trajectory.steps], r.answer

    assert run(3) == run(3)


# -- faults -------------------------------------------------------------------------------------------
def test_unknown_role_pattern_and_backend_names_list_the_known_ones():
    with pytest.raises(TeamError) as e:
        Team.build(["solvr", "verifier"], "loop")
    assert "unknown role 'solvr'" in str(e.value) and "did you mean 'solver'" in str(e.value)
    assert "verifier" in str(e.value)  # the known roles are listed

    with pytest.raises(TeamError) as e:
        Team.build(["solver", "verifier"], "loops")
    assert "unknown pattern 'loops'" in str(e.value) and "loop, router, sequential" in str(e.value)

    with pytest.raises(TeamError) as e:
        Team.build([{"use": "solver", "backend": "gpt9"}, "verifier"], "loop")
    assert "unknown backend 'gpt9'" in str(e.value) and "scripted" in str(e.value)

    with pytest.raises(TeamError) as e:
        Team.build(["solver", "verifier"], {"name": "loop", "critic": "judge"})
    assert "pattern.critic" in str(e.value) and "the team's roles: solver, verifier" in str(e.value)

    team = loop_team(lambda m: "", lambda m: "")
    with pytest.raises(KeyError, match="the team's roles: solver, verifier"):
        team.role("judge")


def test_backend_failure_is_recorded_and_the_pattern_decides():
    def broken(msgs):
        raise LLMError("the server at 127.0.0.1:9 refused the connection")

    result = loop_team(broken, lambda m: code("verdict(approve=True)")).run("q")
    assert result.status == "error"
    assert "role 'solver' (turn 1) ended with status 'error'" in result.trajectory.error
    assert "refused the connection" in result.trajectory.error
    assert result.trajectory.meta["calls"][0]["status"] == "error"

    # skip: the failing critic counts as a missing verdict (approve, as in Dr. MAS math)
    result = loop_team(lambda m: code("final_answer(4)"), broken, on_role_error="skip").run("q")
    assert (result.status, result.answer) == ("success", 4)
    assert result.trajectory.meta["calls"][1]["status"] == "error"


def test_a_role_that_exceeds_its_steps_is_recorded():
    team = Team.build(
        [{"use": "solver", "backend": "s", "max_steps": 2}, {"use": "verifier", "backend": "v"}],
        {"name": "loop", "on_role_error": "fail"},
        backends={"s": Scripted(lambda m: code("x = 1")), "v": Scripted(lambda m: code("verdict(approve=True)"))},
    )
    result = team.run("q")
    assert result.status == "error" and "status 'max_steps'" in result.trajectory.error
    kinds = [s.kind for s in result.trajectory.by_role("solver")]
    assert kinds == ["action", "action", "summary"]


class Hanging(LLM):
    async def _complete(self, messages, **kwargs):
        await asyncio.sleep(3600)


def test_hanging_backend_never_hangs_the_episode():
    team = Team.build(
        [{"name": "a", "backend": "h", "timeout_s": 0.3}, {"name": "b", "backend": "s"}],
        {"name": "sequential", "on_role_error": "skip"},
        backends={"h": Hanging(), "s": Scripted([code("final_answer(1)")])},
    )
    result = team.run("q")
    assert (result.status, result.answer) == ("success", 1)
    assert result.trajectory.meta["calls"][0]["status"] == "timeout"

    team = Team.build([{"name": "a", "backend": "h"}], "sequential", backends={"h": Hanging()}, timeout_s=0.3)
    result = team.run("q")
    assert result.status == "timeout" and "in role 'a' turn 1" in result.trajectory.error


# -- files: roles, teams, task files, errors with file:line:field -------------------------------------
def test_bundled_roles_load_by_name():
    for name in ("solver", "verifier", "router", "search", "answer", "planner", "coder", "reviewer", "analyst"):
        role = load_role(name)
        assert role.name == name and role.description
    assert load_role("verifier").output.kind == "verdict"
    assert load_role("router").output.kind == "route"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_role_file_errors_name_file_line_and_field(tmp_path):
    write(
        tmp_path / "agents" / "judge.yaml",
        """
        name: judge
        system: Judge it.
        max_steps: 0
        output: {kind: verdict, colour: red}
        """,
    )
    team_file = write(tmp_path / "team.yaml", "roles: [solver, judge]\npattern: {name: loop, critic: judge}\n")
    with pytest.raises(TeamError) as e:
        load_team(team_file)
    msg = str(e.value)
    assert "judge.yaml:3: max_steps" in msg and "greater than or equal to 1" in msg
    assert "judge.yaml:4: output.colour: unknown field `colour`" in msg
    assert "team.yaml:1: roles" in msg


def test_team_file_errors_name_line_and_field(tmp_path):
    team_file = write(
        tmp_path / "team.yaml",
        """
        name: t
        roles:
          - solver
          - {use: verifier, backend: nowhere}
        pattern:
          name: loop
          max_rounds: 0
        """,
    )
    with pytest.raises(TeamError) as e:
        load_team(team_file)
    assert "team.yaml:4: roles.1.backend: unknown backend 'nowhere'" in str(e.value)

    write(team_file, "roles: [solver, verifier]\npattern:\n  name: loop\n  max_rounds: 0\n  colour: red\n")
    with pytest.raises(TeamError) as e:
        load_team(team_file)
    assert "team.yaml:4: pattern.max_rounds: Input should be greater than or equal to 1\n  fix: got 0" in str(e.value)

    write(team_file, "roles: [solver, verifier]\npattern: {name: loop, colour: red}\nbakends: {}\n")
    with pytest.raises(TeamError) as e:
        load_team(team_file)
    assert "team.yaml:3: bakends: unknown field" in str(e.value) and "did you mean `backends`" in str(e.value)


def test_local_role_files_and_prompt_templates(tmp_path):
    write(tmp_path / "agents" / "prompts" / "judge.md", "You are the $role. Choose among $choices.\n")
    write(
        tmp_path / "agents" / "judge.yaml",
        "name: judge\ndescription: picks\nprompt_file: prompts/judge.md\noutput: route\n",
    )
    write(
        tmp_path / "team.yaml",
        """
        roles: [judge, {use: solver, name: solver2, max_steps: 1}, answer]
        pattern: {name: router, finish: [answer]}
        backends: {default: {backend: scripted, replies: []}}
        default_backend: default
        """,
    )
    team = load_team(tmp_path / "team.yaml")
    assert team.role_names == ["judge", "solver2", "answer"]
    assert team.roles["solver2"].max_steps == 1 and team.roles["solver2"].prompt_file.endswith("solver.md")
    text = team.instructions("judge")
    assert text.startswith("You are the judge. Choose among solver2 (solves a math word problem")
    assert "route(role, message)" in text


def team_task(tmp_path: Path, body: str) -> Path:
    write(tmp_path / "data" / "sales.csv", "region,units,unit_price\nn,2,1.5\ns,1,4.0\nn,1,1.0\n")
    return write(tmp_path / "team_task.yaml", body)


DATA_TEAM = """
    name: data-team
    task: Revenue by region as `by_region`.
    inputs:
      sales: {file: data/sales.csv}
    outputs:
      by_region: {format: csv}
      answer: {variable: final_answer, format: json}
    team:
      roles:
        - use: analyst
          backend: a
          output: {publishes: {by_region: revenue per region}}
        - {use: reviewer, backend: r}
      pattern: {name: loop, worker: analyst, critic: reviewer}
      backends:
        a: {backend: scripted, replies: ["```python\\nsales['revenue'] = sales.units * sales.unit_price\\nby_region = sales.groupby('region', as_index=False)['revenue'].sum()\\nfinal_answer(by_region)\\n```"]}
        r: {backend: scripted, replies: ["```python\\nverdict(approve=bool(by_region.revenue.sum() == 8.0))\\n```"]}
"""


def test_team_task_file_runs_end_to_end_into_the_store(tmp_path):
    from cave.store import Store

    path = team_task(tmp_path, DATA_TEAM)
    with Store(tmp_path / "runs" / "cave.db") as store:
        outcome = asyncio.run(arun_team_task(path, store=store))
        assert outcome.ok, (outcome.result.trajectory.error, outcome.outputs)
        saved = {o.name: o.path for o in outcome.outputs}
        assert pd.read_csv(saved["by_region"]).to_dict("list") == {"region": ["n", "s"], "revenue": [4.0, 4.0]}
        stored = store.load(outcome.result.trajectory.run_id)
        assert [s.role for s in stored.steps] == ["analyst", "reviewer"]
        assert stored.status == "success" and stored.team_run_id == outcome.result.team_run_id


def test_team_task_file_errors_cover_task_and_team(tmp_path):
    path = team_task(
        tmp_path,
        """
        task: ""
        team:
          roles: [solver, verifyer]
          pattern: loop
        """,
    )
    with pytest.raises(TeamError) as e:
        load_team_task(path)
    msg = str(e.value)
    assert "team_task.yaml:3: team.roles" in msg and "did you mean 'verifier'" in msg
    assert "team_task.yaml:1: task" in msg


def test_team_main_shows_each_roles_steps(tmp_path):
    from rich.console import Console

    console = Console(record=True, width=120)
    assert team_main(team_task(tmp_path, DATA_TEAM), console=console) == 0
    out = console.export_text()
    assert "▶ analyst turn 1" in out and "▶ reviewer turn 1" in out
    assert "⇢ by_region: analyst → reviewer" in out
    assert "analyst step 1" in out and "reviewer step 1 (verdict" in out  # numbered per role, from 1
    assert "[red]" not in out and "[/]" not in out  # markup is styling, never shown as text
    assert "team run" in out and "success" in out


def test_inputs_are_private_per_runtime_unless_shared():
    mutate = Scripted(lambda m: code("sales['units'] = 0\nfinal_answer(int(sales['units'].sum()))"))
    read = Scripted(lambda m: code("final_answer(int(sales['units'].sum()))"))
    sales = pd.DataFrame({"units": [1, 2, 3]})
    roles = [{"name": "a", "backend": "m"}, {"name": "b", "backend": "r"}]
    team = Team.build(roles, "sequential", backends={"m": mutate, "r": read})
    result = team.run("go", inputs={"sales": sales})
    assert result.answer == 6  # b saw the data as given, not a's change
    assert list(sales["units"]) == [1, 2, 3]  # the caller's object is untouched

    team = Team.build(roles, "sequential", backends={"m": mutate, "r": read}, share_inputs=True)
    result = team.run("go", inputs={"sales": sales})
    assert result.answer == 0 and list(sales["units"]) == [0, 0, 0]  # zero-copy: one live object


def test_declared_outputs_bind_the_answer_or_fail_the_turn():
    # One declared output and final_answer(value) without the variable: the value is handed on under that name.
    team = Team.build(
        [
            {"name": "a", "backend": "a", "output": {"publishes": {"table": "the result"}}},
            {"name": "b", "backend": "b"},
        ],
        "sequential",
        backends={
            "a": Scripted([code("t = [1, 2, 3]\nfinal_answer(t)")]),
            "b": Scripted([code("final_answer(sum(table))")]),
        },
    )
    result = team.run("go")
    assert result.answer == 6 and result.trajectory.meta["outputs_from_answer"][0]["name"] == "table"

    # Two declared outputs, one missing: the turn fails the contract; the loop retries with the reason.
    worker = Scripted([code("x = 1\nfinal_answer(x)"), code("x = 1\ny = 2\nfinal_answer(x + y)")])
    team = Team.build(
        [
            {"name": "w", "backend": "w", "output": {"publishes": {"x": "", "y": ""}}},
            {"name": "c", "backend": "c"},
        ],
        {"name": "loop", "on_role_error": "skip"},
        backends={"w": worker, "c": Scripted([code("verdict(approve=x + y == 3)")])},
    )
    result = team.run("go")
    assert (result.status, result.answer) == ("success", 3)
    first = result.trajectory.meta["calls"][0]
    assert first["status"] == "missing_output" and "y" in first["decision_error"]
    assert "Your previous turn failed: the turn ended without y" in last_user(worker.calls[1])
    assert result.trajectory.steps[0].meta["format_ok"] is False


def test_team_main_json_mode_and_exit_codes(tmp_path, capsys):
    import json

    from cave.store import Store
    from cave.team import is_team_task

    path = team_task(tmp_path, DATA_TEAM)
    assert is_team_task(path) and not is_team_task(tmp_path / "data" / "sales.csv")
    with Store(tmp_path / "cave.db") as store:
        assert team_main(path, store=store, mode="json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "success" and summary["roles"] == {"analyst": 1, "reviewer": 1}
    assert summary["outputs"]["by_region"].endswith("by_region.csv")

    bad = write(tmp_path / "bad.yaml", "task: x\nteam:\n  roles: [nobody]\n")
    assert team_main(bad, mode="quiet") == 2
    assert "unknown role 'nobody'" in capsys.readouterr().err


def test_role_skills_are_installed_in_that_roles_runtime_only():
    with_skill = Scripted([code("final_answer(callable(activate_skill))")])
    without = Scripted([code("final_answer('activate_skill' in globals())")])
    team = Team.build(
        [{"name": "a", "backend": "a", "skills": ["dataframe-analysis"]}, {"name": "b", "backend": "b"}],
        "sequential",
        backends={"a": with_skill, "b": without},
    )
    result = team.run("go")
    assert [c["answer"] for c in result.trajectory.meta["calls"]] == ["True", "False"]
    assert "dataframe-analysis" in with_skill.calls[0][0]["content"]  # listed in a's system prompt
    assert "dataframe-analysis" not in without.calls[0][0]["content"]


def test_unknown_role_lists_role_files_only(tmp_path):
    from cave.team import find_role_file

    (tmp_path / "helper.yaml").write_text("name: helper\nsystem: help\n")
    (tmp_path / "team_task.yaml").write_text("task: x\nteam: {roles: [helper], pattern: sequential}\n")
    (tmp_path / "broken.yaml").write_text("a: [\n")
    with pytest.raises(KeyError) as e:
        find_role_file("helpr", [tmp_path])
    msg = str(e.value)
    assert "did you mean 'helper'" in msg and "team_task" not in msg and "broken" not in msg


# -- the vote pattern ---------------------------------------------------------------------------------
def vote_team(replies: dict[str, list[str]], **pattern) -> Team:
    roles = [{"use": "solver", "name": name, "backend": name} for name in replies]
    return Team.build(roles, {"name": "vote", **pattern}, backends={n: Scripted(r) for n, r in replies.items()})


def test_vote_stops_once_a_majority_agrees_and_records_every_answer():
    llm = Scripted([code("final_answer(0.3333)"), code("final_answer(1 / 3)"), code("final_answer(7)")])
    team = Team.build([{"use": "solver", "backend": "a"}], {"name": "vote", "n": 3}, backends={"a": llm})
    result = team.run("What is 1 / 3?", seed=0)
    assert (result.status, result.answer) == ("success", 0.3333)  # 0.3333 and 1/3 agree within rounding
    votes = result.trajectory.meta["votes"]
    assert [(v["status"], v["group"]) for v in votes] == [("success", 0), ("success", 0)]  # early exit: 2 of 3
    assert len(llm.calls) == 2


def test_vote_without_a_majority_is_unverified_with_the_most_agreed_answer_and_why():
    replies = [code("final_answer(5)"), code("final_answer(6)"), code("final_answer(7)")]
    result = vote_team({"a": replies}, n=3).run("Pick a number", seed=0)
    assert (result.status, result.answer) == ("unverified", 5)
    assert "no answer had a majority" in result.trajectory.meta["unverified"]
    assert [v["answer"] for v in result.trajectory.meta["votes"]] == ["5", "6", "7"]


def test_vote_turns_without_an_answer_do_not_vote_and_are_asked_again():
    replies = ["I cannot write code today.", code("final_answer([1, 2])"), code("final_answer([2, 1])")]
    result = vote_team({"a": replies}, n=2, on_role_error="skip").run("Which two?", seed=0)
    assert (result.status, result.answer) == ("success", [1, 2])  # lists agree by their items (ordered: false)
    assert [v["status"] for v in result.trajectory.meta["votes"]] == ["no_code", "success", "success"]


def test_vote_answers_are_independent_each_turn_a_new_runtime_and_its_own_seed():
    seeds: list[int | None] = []

    class Seeded(Scripted):
        def _stream(self, messages, request):
            seeds.append(request.seed)
            return super()._stream(messages, request)

    script = [code("x = 41\nfinal_answer(x + 1)"), code("final_answer(globals().get('x', 0) + 42)")]
    team = Team.build(
        [{"use": "solver", "name": "a", "backend": "a"}], {"name": "vote", "n": 3}, backends={"a": Seeded(script)}
    )
    result = team.run("What is 42?", seed=0)
    assert (result.status, result.answer) == ("success", 42)  # the second turn did not see the first's x
    assert len(seeds) == 2 and seeds[0] != seeds[1]


def test_vote_across_voters_on_different_backends_and_unknown_voters_are_refused():
    team = vote_team({"a": [code("final_answer('Paris')")], "b": [code("final_answer(' paris ')")]}, n=2)
    result = team.run("Capital of France?", seed=0)
    assert (result.status, result.answer) == ("success", "Paris")
    assert [v["role"] for v in result.trajectory.meta["votes"]] == ["a", "b"]
    with pytest.raises(TeamError, match="voters"):
        vote_team({"a": []}, voters=["z"])


VOTE_TEAM = """
task: Total revenue (units x unit_price) of the sales table.
inputs:
  sales: {file: data/sales.csv}
outputs:
  answer: {variable: final_answer, format: json}
team:
  roles:
    - {use: solver, name: a, backend: a}
  pattern: {name: vote, n: 3}
  backends:
    a: {backend: scripted, replies: [REPLIES]}
"""


@pytest.mark.parametrize(
    ("replies", "status", "answer", "exit_code"),
    [
        (["float((sales.units * sales.unit_price).sum())"] * 2, "success", 8.0, 0),
        (["1.0", "2.0", "3.0"], "unverified", 1.0, 0),  # an answer all the same, with why it is unconfirmed
    ],
)
def test_vote_team_task_file_each_answer_from_the_given_inputs(tmp_path, capsys, replies, status, answer, exit_code):
    import json

    # each turn changes the data it was given: the next turn, in a new runtime, still sees it as given
    script = ", ".join(json.dumps(f"```python\nr = {r}\nsales['units'] = 0\nfinal_answer(r)\n```") for r in replies)
    path = team_task(tmp_path, VOTE_TEAM.replace("REPLIES", script))
    assert team_main(path, mode="json") == exit_code
    summary = json.loads(capsys.readouterr().out)
    assert (summary["status"], summary["answer"]) == (status, answer)
