"""The team: a validated spec with its backends, pattern and roles; ``arun`` runs one episode."""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from cave.blocking import run_blocking
from cave.config import ConfigFile
from cave.llm.base import LLM
from cave.registry import did_you_mean
from cave.team.backends import BoundedLLM, make_backend
from cave.team.episode import TeamRun
from cave.team.errors import BackendStartError, TeamError
from cave.team.files import TeamSpec, read_yaml, validate_team
from cave.team.patterns import PATTERNS, Pattern
from cave.team.pools import LocalPool
from cave.team.results import TeamEvent, TeamResult
from cave.team.specs import BackendSpec, RoleSpec

__all__ = ["Team", "load_team"]


class Team:
    """A validated team: its roles, pattern and backends. ``arun`` runs one episode; many may run at once."""

    def __init__(
        self,
        spec: TeamSpec,
        *,
        base_dir: str | Path | None = None,
        backends: Mapping[str, LLM] | None = None,
        lines: Mapping[tuple[str, ...], int] | None = None,
        file: str | None = None,
    ) -> None:
        self.spec = spec
        self.base_dir = Path(base_dir or (Path(spec.source).parent if spec.source else Path.cwd())).resolve()
        self.file = file or spec.source
        self.lines = dict(lines or {})
        self.roles: dict[str, RoleSpec] = {r.name: r for r in spec.roles}
        self._given: dict[str, LLM] = dict(backends or {})
        self._backends: dict[str, BoundedLLM] = {}
        self._owned: set[str] = set()
        self._skills: dict[str, Any] = {}
        self._instructions: dict[str, str] = {}
        pcls = PATTERNS[spec.pattern.name]
        self.pattern: Pattern = pcls(pcls.Options.model_validate(spec.pattern.options), self)

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        roles: Sequence[str | RoleSpec | Mapping[str, Any]],
        pattern: str | Mapping[str, Any] = "sequential",
        *,
        backends: Mapping[str, LLM | str | Mapping[str, Any]] | None = None,
        base_dir: str | Path | None = None,
        **fields: Any,
    ) -> Team:
        """A team from Python: ``Team.build(["solver", "verifier"], {"name": "loop"}, backends={"default": llm})``.

        ``backends`` values are LLM instances (shared by every role that names the key) or backend specs.
        """
        instances = {k: v for k, v in (backends or {}).items() if isinstance(v, LLM)}
        specs = {k: v for k, v in (backends or {}).items() if not isinstance(v, LLM)}
        if "default" in instances and "default_backend" not in fields:
            fields["default_backend"] = "default"
        data = {"roles": list(roles), "pattern": pattern, "backends": specs, **fields}
        base = Path(base_dir or Path.cwd())
        spec = validate_team(ConfigFile("<team>", data), base_dir=base, backend_keys=list(instances))
        return cls(spec, base_dir=base, backends=instances)

    @classmethod
    def from_file(cls, path: str | Path, *, backends: Mapping[str, LLM] | None = None) -> Team:
        cfg = read_yaml(path)
        if not isinstance(cfg.data, dict):
            raise TeamError([f"{path}:1: a team file must be a mapping with `roles:` and `pattern:`"])
        base = Path(path).resolve().parent
        spec = validate_team(cfg, base_dir=base, backend_keys=list(backends or {}))
        return cls(spec, base_dir=base, backends=backends, lines=cfg.lines, file=str(path))

    def where(self, *loc: str) -> str:
        line = next((self.lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in self.lines), 1)
        return f"{self.file or '<team>'}:{line}"

    @property
    def role_names(self) -> list[str]:
        return list(self.roles)

    def role(self, name: str) -> RoleSpec:
        try:
            return self.roles[name]
        except KeyError:
            hint = did_you_mean(name, list(self.roles))
            raise KeyError(f"unknown role {name!r}; {hint}the team's roles: {', '.join(self.roles)}") from None

    # -- backends ------------------------------------------------------------------------------
    def backend_key(self, role: str) -> str:
        return self.role(role).backend or self.spec.default_backend

    def backend(self, key: str) -> BoundedLLM:
        """The shared, bounded backend instance for ``key`` (created on first use: loading a model is heavy)."""
        if key in self._backends:
            return self._backends[key]
        spec = self.spec.backends.get(key)
        if key in self._given:
            inner = self._given[key]
        else:
            spec = spec or BackendSpec(backend=key)
            inner = make_backend(spec.backend, **spec.options)
            self._owned.add(key)
        limit = spec.max_in_flight if spec is not None and spec.max_in_flight else self.spec.max_in_flight
        self._backends[key] = BoundedLLM(inner, limit)
        return self._backends[key]

    def load_backends(self) -> None:
        """Create every backend the roles use now, so a missing model fails before the episode starts."""
        for role in self.roles:
            key = self.backend_key(role)
            try:
                self.backend(key)
            except Exception as e:  # not bad input: the file was valid, the backend did not start
                raise BackendStartError(
                    f"{self.where('backends', key)}: backend {key!r} (role {role}) did not start: "
                    f"{type(e).__name__}: {e}; check its options, or install what it needs"
                ) from e

    async def aclose(self) -> None:
        """Close the backends this team created (not the ones it was given)."""
        for key in list(self._owned):
            b = self._backends.pop(key, None)
            if b is not None:
                await b.aclose()
        self._owned.clear()

    # -- per-role configuration ----------------------------------------------------------------
    def instructions(self, role: str) -> str:
        """The role's instructions: its prompt (template filled in) plus its output contract."""
        if role in self._instructions:
            return self._instructions[role]
        spec = self.role(role)
        text = spec.system or ""
        if spec.prompt_file:
            text = Path(spec.prompt_file).read_text(encoding="utf-8")
        choices = self.pattern.route_choices(role) or []
        values = {
            "role": role,
            "description": spec.description,
            "roles": ", ".join(self.roles),
            "choices": ", ".join(f"{c} ({self.roles[c].description})" if c in self.roles else c for c in choices),
        }
        parts = [string.Template(text).safe_substitute(values).strip()] if text.strip() else []
        decision = self.decision(role)
        if decision == "verdict":
            parts.append(
                'End your turn by calling verdict(approve=True) or verdict(approve=False, feedback="...") in a code block; do not call final_answer.'
            )
        elif decision == "route":
            parts.append(
                f"End your turn by calling route(role, message) in a code block, with role one of: {values['choices']}. Do not call final_answer."
            )
        if spec.output.description:
            parts.append(f"Your answer: {spec.output.description}")
        if spec.output.publishes:
            listed = "\n".join(f"- `{n}`: {d}" for n, d in spec.output.publishes.items())
            parts.append("Leave these variables in your session; they are handed to the roles after you:\n" + listed)
        self._instructions[role] = "\n\n".join(parts)
        return self._instructions[role]

    def decision(self, role: str) -> Literal["verdict", "route"] | None:
        kind = self.role(role).output.kind
        return kind if kind in ("verdict", "route") else self.pattern.decision(role)

    def skills(self, role: str) -> Any:
        spec = self.role(role)
        if not spec.skills:
            return None
        if role not in self._skills:
            from cave import skills as skills_mod

            folders = [str(self.base_dir / s) for s in spec.skills if (self.base_dir / s).exists()]
            names = [s for s in spec.skills if not (self.base_dir / s).exists()]
            found = skills_mod.SkillSet(folders)
            wanted = set(names) | {
                s.name for s in found if any(Path(s.path).resolve().is_relative_to(Path(f).resolve()) for f in folders)
            }
            try:
                self._skills[role] = found.select(sorted(wanted))
            except skills_mod.SkillError as e:
                raise TeamError([f"{self.where('roles')}: role {role}: skills: {e}"]) from None
        return self._skills[role]

    # -- running -------------------------------------------------------------------------------
    async def arun(
        self,
        task: str,
        *,
        seed: int | None = None,
        inputs: Mapping[str, Any] | None = None,
        on_event: Callable[[TeamEvent], None] | None = None,
        keep_runtimes: bool = False,
        team_run_id: str | None = None,
    ) -> TeamResult:
        """One episode. Never raises for a role's or pattern's failure: see ``status`` and ``trajectory.error``."""
        run = TeamRun(self, task, seed=seed, inputs=inputs, on_event=on_event, team_run_id=team_run_id)
        return await run.execute(keep_runtimes=keep_runtimes)

    def run(self, task: str, **kwargs: Any) -> TeamResult:
        """Sync edge of ``arun``."""
        return run_blocking("Team", self.arun, task, **kwargs)

    async def arun_many(
        self,
        tasks: Sequence[str],
        *,
        seeds: Sequence[int | None] | None = None,
        inputs: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
        max_episodes: int | None = None,
    ) -> list[TeamResult]:
        """Many episodes at once on this event loop (e.g. N rollouts x a batch), results in order."""
        return await LocalPool(self, max_episodes=max_episodes).arun_many(tasks, seeds=seeds, inputs=inputs)


def load_team(path: str | Path, *, backends: Mapping[str, LLM] | None = None) -> Team:
    """Read, validate and build a team file. Raises TeamError (every problem, with file:line and the fix).

    ``backends``: LLM instances by key, used instead of creating the backends the file names under those keys.
    """
    return Team.from_file(path, backends=backends)
