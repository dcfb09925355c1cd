"""Teams: several agents, each a role with its own LLM backend and runtime, run by a routing pattern.

A role is a YAML file in ``agents/`` (name, system prompt or prompt file, backend reference, runtime own/shared,
skills, max steps, output contract), loaded by name. A team lists roles and a pattern, either in a team file or in
a ``team:`` section of a task file::

    team:
      roles: [solver, verifier]                 # agents/solver.yaml, agents/verifier.yaml
      pattern: {name: loop, worker: solver, critic: verifier, max_rounds: 2}
      backends:
        default: {backend: local, max_in_flight: 1}

    team = load_team("team.yaml")                # or Team.build(roles=[...], pattern="loop", backends={...})
    result = await team.arun("What is 17 * 23?", seed=0)
    result.answer, result.status, result.trajectory    # ONE Trajectory: every role's steps, tagged

One concept per module:

- ``specs``: the pydantic models of role definitions and of a team's parts, and reading such files;
  ``errors``: TeamError, BackendStartError;
- ``decisions``: ``verdict`` / ``route`` / ``publish``, injected into the deciding role's runtime. Decisions are
  structured, never parsed out of free text: calling one ends the role's turn (like ``final_answer``) and the
  value crosses back to the host, even from a kernel in another process;
- ``roles``: role files by name; ``files``: ``TeamSpec`` and team files with file:line errors (cave.config);
- ``backends``: backends shared by a team's episodes, each behind a bound on in-flight requests;
- ``patterns``: ``sequential``, ``loop`` (worker/critic with a verdict), ``router`` (a structured choice among
  roles), ``vote`` (independent answers, the majority wins), ``custom`` (``async def run(team, task)``),
  registered by name (``@register_pattern("loop")``);
- ``results``: RoleResult, TeamResult and the events an episode emits;
- ``team``: the Team (spec + backends + pattern); ``episode``: one run of it (TeamRun), with its own runtimes and
  the published slots (``publish("name", obj)`` moves the object, not a printout of it);
- ``pools``: LocalPool (this event loop); ``ray_pool``: RayTeamPool (Ray actors), the same API;
- ``task_files``: task files with a ``team:`` section.

Seeds derive per role from the episode seed, so a team is deterministic given seeds and holds no global state.
Names are imported on first use (``from cave.team import Team``), so a kernel that unpickles ``verdict`` loads
``cave.team.decisions`` and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cave import lazy_exports

_EXPORTS = {
    "SamplingSpec": "cave.team.specs",
    "RoleRuntimeSpec": "cave.team.specs",
    "OutputContract": "cave.team.specs",
    "RoleSpec": "cave.team.specs",
    "BackendSpec": "cave.team.specs",
    "TeamRuntimeSpec": "cave.team.specs",
    "PatternSpec": "cave.team.specs",
    "TeamSpec": "cave.team.files",
    "TeamError": "cave.team.errors",
    "BackendStartError": "cave.team.errors",
    "Verdict": "cave.team.decisions",
    "Route": "cave.team.decisions",
    "verdict": "cave.team.decisions",
    "make_route": "cave.team.decisions",
    "publish": "cave.team.decisions",
    "parse_verdict": "cave.team.decisions",
    "parse_route": "cave.team.decisions",
    "summarize": "cave.team.decisions",
    "bundled_agents_dir": "cave.team.roles",
    "role_search_dirs": "cave.team.roles",
    "known_roles": "cave.team.roles",
    "find_role_file": "cave.team.roles",
    "load_role": "cave.team.roles",
    "load_team": "cave.team.team",
    "parse_team_file": "cave.team.files",
    "validate_team": "cave.team.files",
    "BoundedLLM": "cave.team.backends",
    "make_backend": "cave.team.backends",
    "PatternOptions": "cave.team.patterns",
    "Outcome": "cave.team.patterns",
    "PATTERNS": "cave.team.patterns",
    "register_pattern": "cave.team.patterns",
    "Pattern": "cave.team.patterns",
    "Sequential": "cave.team.patterns",
    "Loop": "cave.team.patterns",
    "Router": "cave.team.patterns",
    "Vote": "cave.team.patterns",
    "Custom": "cave.team.patterns",
    "FINISH": "cave.team.patterns",
    "RoleResult": "cave.team.results",
    "TeamResult": "cave.team.results",
    "TeamStarted": "cave.team.results",
    "RoleStarted": "cave.team.results",
    "RoleEvent": "cave.team.results",
    "RoleFinished": "cave.team.results",
    "Handoff": "cave.team.results",
    "TeamFinished": "cave.team.results",
    "TeamEvent": "cave.team.results",
    "Team": "cave.team.team",
    "LocalPool": "cave.team.pools",
    "RayTeamPool": "cave.team.ray_pool",
    "derive_seed": "cave.team.episode",
    "TeamRun": "cave.team.episode",
    "private_copy": "cave.team.episode",
    "TeamTask": "cave.team.task_files",
    "load_team_task": "cave.team.task_files",
    "TeamOutcome": "cave.team.task_files",
    "is_team_task": "cave.team.task_files",
    "arun_team_task": "cave.team.task_files",
}

__all__ = [
    "BackendSpec",
    "BackendStartError",
    "BoundedLLM",
    "Custom",
    "FINISH",
    "Handoff",
    "LocalPool",
    "Loop",
    "Outcome",
    "OutputContract",
    "PATTERNS",
    "Pattern",
    "PatternOptions",
    "PatternSpec",
    "RayTeamPool",
    "RoleEvent",
    "RoleFinished",
    "RoleResult",
    "RoleRuntimeSpec",
    "RoleSpec",
    "RoleStarted",
    "Route",
    "Router",
    "SamplingSpec",
    "Sequential",
    "Vote",
    "Team",
    "TeamError",
    "TeamEvent",
    "TeamFinished",
    "TeamOutcome",
    "TeamResult",
    "TeamRun",
    "TeamRuntimeSpec",
    "TeamSpec",
    "TeamStarted",
    "TeamTask",
    "Verdict",
    "arun_team_task",
    "bundled_agents_dir",
    "derive_seed",
    "find_role_file",
    "is_team_task",
    "known_roles",
    "load_role",
    "load_team",
    "load_team_task",
    "make_backend",
    "make_route",
    "parse_route",
    "parse_team_file",
    "parse_verdict",
    "private_copy",
    "publish",
    "register_pattern",
    "role_search_dirs",
    "summarize",
    "validate_team",
    "verdict",
]

if TYPE_CHECKING:
    from cave.team.backends import BoundedLLM, make_backend
    from cave.team.decisions import Route, Verdict, make_route, parse_route, parse_verdict, publish, summarize, verdict
    from cave.team.episode import TeamRun, derive_seed, private_copy
    from cave.team.errors import BackendStartError, TeamError
    from cave.team.files import TeamSpec, parse_team_file, validate_team
    from cave.team.patterns import (
        FINISH,
        PATTERNS,
        Custom,
        Loop,
        Outcome,
        Pattern,
        PatternOptions,
        Router,
        Sequential,
        Vote,
        register_pattern,
    )
    from cave.team.pools import LocalPool
    from cave.team.ray_pool import RayTeamPool
    from cave.team.results import (
        Handoff,
        RoleEvent,
        RoleFinished,
        RoleResult,
        RoleStarted,
        TeamEvent,
        TeamFinished,
        TeamResult,
        TeamStarted,
    )
    from cave.team.roles import bundled_agents_dir, find_role_file, known_roles, load_role, role_search_dirs
    from cave.team.specs import (
        BackendSpec,
        OutputContract,
        PatternSpec,
        RoleRuntimeSpec,
        RoleSpec,
        SamplingSpec,
        TeamRuntimeSpec,
    )
    from cave.team.task_files import TeamOutcome, TeamTask, arun_team_task, is_team_task, load_team_task
    from cave.team.team import Team, load_team


__getattr__ = lazy_exports(__name__, _EXPORTS)
