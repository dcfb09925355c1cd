"""Trajectories in SQLite through SQLAlchemy, written step by step.

Four tables: ``runs``, ``steps``, ``messages`` and ``executions``. Each step is
one transaction, committed when the step finishes, so a run killed with
SIGKILL after step k still has steps 1..k on disk. Messages are stored once per
run (deduplicated by content); a step refers to the messages of its prompt by
id, so every step's exact prompt is kept without storing the conversation
over and over.

The store consumes the agent's events (``store.on_event(event)``) and reads
runs back as the same ``Trajectory`` record the agent produced.

Where: ``$CAVE_HOME/cave.db`` if CAVE_HOME is set, else ``./runs/cave.db``; each
run also gets a folder next to the database (``runs/<run_id>/``) with
``trajectory.jsonl`` (one line per step, appended as it happens), the saved
outputs and ``summary.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    create_engine,
    event,
    insert,
    select,
    update,
)

from cave.events import Compacted, RunError, RunFinished, RunStarted, StepFinished
from cave.llm.base import Usage
from cave.runtimes.base import Execution
from cave.trajectory import Step, Trajectory, jsonable

__all__ = ["Store", "default_db_path", "owner", "owner_alive"]

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(200)),
    Column("task", Text, nullable=False),
    Column("status", String(20), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float),
    Column("finished_at", Float),
    Column("final_answer", Text),  # JSON of a JSON-friendly stand-in
    Column("error", Text),
    Column("n_steps", Integer, default=0),
    Column("prompt_tokens", Integer, default=0),
    Column("completion_tokens", Integer, default=0),
    Column("cached_tokens", Integer, default=0),
    Column("total_tokens", Integer, default=0),
    Column("team_run_id", String(32)),
    Column("task_path", Text),  # the task file, for --resume
    Column("run_dir", Text),
    Column("meta", Text),  # JSON
)


def _run_records(name: str, *columns: Any) -> Table:
    """A table of records that belong to one run: an id, the run's id, then ``columns``."""
    return Table(
        name,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("run_id", String(32), ForeignKey("runs.id"), nullable=False, index=True),
        *columns,
    )


steps = _run_records(
    "steps",
    Column("idx", Integer, nullable=False),
    Column("role", String(64)),
    Column("kind", String(20)),
    Column("completion", Text),
    Column("code", Text),
    Column("observation", Text),
    Column("finish_reason", String(20)),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("cached_tokens", Integer),
    Column("total_tokens", Integer),
    Column("started_at", Float),
    Column("duration", Float),
    Column("llm_duration", Float),
    Column("reward", Float),
    Column("prompt_refs", Text),  # JSON list of message ids: the exact prompt of this call
    Column("token_ids", Text),
    Column("logprobs", Text),
    Column("prompt_token_ids", Text),
    Column("team_run_id", String(32)),
    Column("meta", Text),
    UniqueConstraint("run_id", "idx"),
)

messages = _run_records(
    "messages",
    Column("role", String(20), nullable=False),
    Column("content", Text, nullable=False),
    Column("digest", String(40), nullable=False),
    Column("extra", Text),  # JSON of other keys (name, tool_calls...), if any
)

executions = _run_records(
    "executions",
    Column("step_idx", Integer, nullable=False),
    Column("block", Integer, nullable=False),
    Column("code", Text),
    Column("stdout", Text),
    Column("stderr", Text),
    Column("result", Text),
    Column("error", Text),  # JSON of ExecError
    Column("duration", Float),
    Column("timed_out", Boolean),
    Column("recovery", String(20)),
    Column("final", Boolean),
)


_INSERT_STEP = insert(steps)
_INSERT_EXECUTION = insert(executions)
_INSERT_MESSAGE = insert(messages)
_UPDATE_TOTALS = (
    update(runs)
    .where(runs.c.id == bindparam("rid"))
    .values(
        n_steps=runs.c.n_steps + 1,
        prompt_tokens=runs.c.prompt_tokens + bindparam("p"),
        completion_tokens=runs.c.completion_tokens + bindparam("c"),
        cached_tokens=runs.c.cached_tokens + bindparam("k"),
        total_tokens=runs.c.total_tokens + bindparam("t"),
        updated_at=bindparam("now"),
    )
)
_JSONL_FIELDS = (
    "index", "role", "kind", "completion", "code", "observation", "finish_reason", "started_at",
    "duration", "llm_duration", "reward", "run_id", "team_run_id", "meta",
)  # fmt: skip


def _jsonl_line(step: Step, refs: list[int]) -> str:
    """One step as a line of trajectory.jsonl (its prompt as ids of rows in the messages table)."""
    line = {f: getattr(step, f) for f in _JSONL_FIELDS}
    line["usage"] = step.usage.to_dict()
    line["execution"] = _execution_json(step.execution)
    line["messages"] = refs
    return json.dumps(line, default=repr) + "\n"


def _execution_json(ex: Execution | None) -> dict[str, Any] | None:
    if ex is None:
        return None
    return ex.to_dict()


def default_db_path() -> Path:
    """The one default store, wherever you run from: ``$CAVE_RUNS/cave.db``, else ``$CAVE_HOME/runs/cave.db``
    (``~/.cache/cave/runs/cave.db`` when neither is set)."""
    runs_dir = os.environ.get("CAVE_RUNS")
    if runs_dir:
        return Path(runs_dir).expanduser() / "cave.db"
    from cave.llm.models import cave_home

    return cave_home() / "runs" / "cave.db"


def owner() -> dict[str, Any]:
    """Who runs a run: this process, told apart from a later process that got the same pid."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": _process_started(os.getpid())}


def owner_alive(who: Any) -> bool | None:
    """Whether the process that ran a run is still there (None: cannot tell, e.g. another machine)."""
    if not isinstance(who, dict) or who.get("host") != socket.gethostname() or not isinstance(who.get("pid"), int):
        return None
    started = _process_started(who["pid"])
    if started is None:
        try:
            os.kill(who["pid"], 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return who.get("started") is None
    return started == who.get("started")


def _process_started(pid: int) -> float | None:
    """The process's start time in clock ticks since boot (Linux), None elsewhere or when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return float(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=repr)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class Store:
    """A SQLite trajectory store. ``Store()`` opens (or creates) the default database."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path else default_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.root = self.path.parent
        self.engine = create_engine(f"sqlite:///{self.path}")
        event.listen(self.engine, "connect", _sqlite_pragmas)
        metadata.create_all(self.engine)
        self._msg_ids: dict[str, dict[tuple[str, str], int]] = {}  # run_id -> (role, digest) -> id
        self._jsonl_checked: set[str] = set()  # runs whose JSONL was compared with the database in this process
        self._meta: dict[str, dict[str, Any]] = {}  # run_id -> extra run metadata given at start
        # run_id -> id(message dict) -> (the dict, its row id): each message dict is hashed once
        self._seen: dict[str, dict[int, tuple[dict[str, Any], int]]] = {}
        self._dirs: dict[str, Path] = {}

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_dir(self, run_id: str) -> Path:
        d = self._dirs.get(run_id)
        if d is None:
            d = self._dirs[run_id] = self.root / run_id
            d.mkdir(parents=True, exist_ok=True)
        return d

    # -- writing ---------------------------------------------------------------------------------
    def on_event(self, ev: Any) -> None:
        """Feed every agent event here; the store keeps what it needs."""
        if isinstance(ev, RunStarted):
            if ev.resumed:
                self.mark(ev.trajectory.run_id, "running", error=None)
                self.update_meta(ev.trajectory.run_id, owner=owner())  # this process runs it now
            else:
                self.start_run(ev.trajectory)
        elif isinstance(ev, StepFinished):
            self.add_step(ev.step)
        elif isinstance(ev, RunFinished):
            self.finish_run(ev.trajectory)
        elif isinstance(ev, RunError | Compacted):
            pass  # the error lands in RunFinished; a summary call arrives as its own StepFinished

    def start_run(
        self,
        traj: Trajectory,
        *,
        name: str | None = None,
        task_path: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        meta = {**self._meta.pop(traj.run_id, {}), **(meta or {}), **traj.meta, "owner": owner()}
        run_dir = self.run_dir(traj.run_id)
        with self.engine.begin() as conn:
            conn.execute(
                insert(runs).values(
                    id=traj.run_id,
                    name=name or meta.get("name"),
                    task=traj.task,
                    status=traj.status,
                    created_at=traj.started_at,
                    updated_at=time.time(),
                    team_run_id=traj.team_run_id,
                    task_path=task_path or meta.get("task_path"),
                    run_dir=str(run_dir),
                    meta=_dumps(meta),
                )
            )
        self._msg_ids[traj.run_id] = {}

    def prepare(self, run_id: str, **meta: Any) -> None:
        """Attach metadata (task_path, name, ...) to a run before its RunStarted event arrives."""
        self._meta.setdefault(run_id, {}).update(meta)

    def add_step(self, step: Step) -> None:
        """Write one step (its new messages, the step, its executions) in one committed transaction."""
        run_id = step.run_id
        u = step.usage
        blocks = step.meta.get("blocks") or []
        with self.engine.begin() as conn:
            refs = self._message_refs(conn, run_id, step.messages or [])
            meta = {k: v for k, v in step.meta.items() if k != "blocks"}
            # Plain parameter dicts on prebuilt statements: SQLAlchemy compiles each statement once.
            conn.execute(
                _INSERT_STEP,
                {
                    "run_id": run_id,
                    "idx": step.index,
                    "role": step.role,
                    "kind": step.kind,
                    "completion": step.completion,
                    "code": step.code,
                    "observation": step.observation,
                    "finish_reason": step.finish_reason,
                    "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens,
                    "cached_tokens": u.cached_tokens,
                    "total_tokens": u.total_tokens,
                    "started_at": step.started_at,
                    "duration": step.duration,
                    "llm_duration": step.llm_duration,
                    "reward": step.reward,
                    "prompt_refs": json.dumps(refs),
                    "token_ids": _dumps(step.token_ids),
                    "logprobs": _dumps(step.logprobs),
                    "prompt_token_ids": _dumps(step.prompt_token_ids),
                    "team_run_id": step.team_run_id,
                    "meta": _dumps(meta),
                },
            )
            if blocks:
                conn.execute(
                    _INSERT_EXECUTION,
                    [
                        {
                            "run_id": run_id,
                            "step_idx": step.index,
                            "block": b,
                            "code": rec["code"],
                            "stdout": rec["execution"]["stdout"],
                            "stderr": rec["execution"]["stderr"],
                            "result": rec["execution"]["result"],
                            "error": _dumps(rec["execution"]["error"]),
                            "duration": rec["execution"]["duration"],
                            "timed_out": rec["execution"]["timed_out"],
                            "recovery": rec["execution"]["recovery"],
                            "final": rec.get("final", False),
                        }
                        for b, rec in enumerate(blocks)
                    ],
                )
            conn.execute(
                _UPDATE_TOTALS,
                {
                    "rid": run_id,
                    "p": u.prompt_tokens,
                    "c": u.completion_tokens,
                    "k": u.cached_tokens,
                    "t": u.total_tokens,
                    "now": time.time(),
                },
            )
        # The JSONL next to the database is for people and tools; the database is the source of truth.
        path = self.run_dir(run_id) / "trajectory.jsonl"
        behind = self._jsonl_behind(run_id, path, step.index)
        with open(path, "a", encoding="utf-8") as f:
            for earlier, earlier_refs in behind:
                f.write(_jsonl_line(earlier, earlier_refs))
            f.write(_jsonl_line(step, refs))

    def _jsonl_behind(self, run_id: str, path: Path, index: int) -> list[tuple[Step, list[int]]]:
        """The stored steps before ``index`` that the run's JSONL lacks: a process killed between the database's
        commit and the JSONL's append left the last one out, and a resumed run writes it before its own steps.
        Checked once per run and process."""
        if run_id in self._jsonl_checked:
            return []
        self._jsonl_checked.add(run_id)
        have = sum(1 for _ in path.open(encoding="utf-8")) if path.exists() else 0
        if have >= index:
            return []
        with self.engine.connect() as conn:
            refs = {
                r.idx: json.loads(r.prompt_refs or "[]")
                for r in conn.execute(select(steps.c.idx, steps.c.prompt_refs).where(steps.c.run_id == run_id))
            }
        return [(s, refs.get(s.index, [])) for s in self.load(run_id).steps if have <= s.index < index]

    def _message_refs(self, conn: Any, run_id: str, msgs: list[dict[str, Any]]) -> list[int]:
        known = self._msg_ids.get(run_id)
        if known is None:  # a fresh process (resume): load what this run already stored
            rows = conn.execute(
                select(messages.c.id, messages.c.role, messages.c.digest).where(messages.c.run_id == run_id)
            )
            known = self._msg_ids[run_id] = {(r.role, r.digest): r.id for r in rows}
        # The agent reuses the same message dicts from step to step: hash each one once.
        seen = self._seen.setdefault(run_id, {})
        refs = []
        for m in msgs:
            hit = seen.get(id(m))
            if hit is not None and hit[0] is m:
                refs.append(hit[1])
                continue
            content = str(m.get("content") or "")
            extra = {k: v for k, v in m.items() if k not in ("role", "content")}
            digest = hashlib.sha1(f"{content}\x00{_dumps(extra) if extra else ''}".encode()).hexdigest()
            key = (m["role"], digest)
            mid = known.get(key)
            if mid is None:
                res = conn.execute(
                    _INSERT_MESSAGE,
                    {
                        "run_id": run_id,
                        "role": m["role"],
                        "content": content,
                        "digest": digest,
                        "extra": _dumps(extra) if extra else None,
                    },
                )
                mid = known[key] = res.inserted_primary_key[0]
            seen[id(m)] = (m, mid)  # keeping m alive keeps its id unique
            refs.append(mid)
        return refs

    def finish_run(self, traj: Trajectory) -> None:
        self._seen.pop(traj.run_id, None)
        with self.engine.begin() as conn:
            conn.execute(
                update(runs)
                .where(runs.c.id == traj.run_id)
                .values(
                    status=traj.status,
                    finished_at=traj.finished_at or time.time(),
                    updated_at=time.time(),
                    final_answer=json.dumps(jsonable(traj.final_answer)),
                    error=traj.error,
                    meta=_dumps(traj.meta),
                )
            )

    def mark(self, run_id: str, status: str, *, error: str | None = None) -> None:
        """Set a run's status (e.g. "interrupted" after Ctrl-C, "running" on resume)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(runs).where(runs.c.id == run_id).values(status=status, error=error, updated_at=time.time())
            )

    def update_meta(self, run_id: str, **values: Any) -> None:
        with self.engine.begin() as conn:
            row = conn.execute(select(runs.c.meta).where(runs.c.id == run_id)).first()
            meta = _loads(row.meta) if row and row.meta else {}
            meta.update(values)
            conn.execute(update(runs).where(runs.c.id == run_id).values(meta=_dumps(meta)))

    # -- reading ---------------------------------------------------------------------------------
    def list_runs(self, limit: int = 20, status: str | None = None) -> list[dict[str, Any]]:
        """Newest first: id, name, task, status, steps, tokens, times."""
        q = select(runs).order_by(runs.c.created_at.desc()).limit(limit)
        if status:
            q = q.where(runs.c.status == status)
        with self.engine.connect() as conn:
            return [self._run_row(r) for r in conn.execute(q)]

    def get_run(self, run_id: str) -> dict[str, Any]:
        """One run's row. A unique prefix of the id is enough. Raises KeyError listing recent ids."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(runs).where(runs.c.id.startswith(run_id, autoescape=True)).limit(2)).all()
        if len(rows) != 1:
            recent = ", ".join(r["id"] for r in self.list_runs(5)) or "(none)"
            what = "is ambiguous" if rows else "not found"
            raise KeyError(f"run {run_id!r} {what} in {self.path}; recent runs: {recent}")
        return self._run_row(rows[0])

    @staticmethod
    def _run_row(r: Any) -> dict[str, Any]:
        d = dict(r._mapping)
        d["meta"] = _loads(d["meta"]) or {}
        d["final_answer"] = _loads(d["final_answer"])
        if d["status"] == "running" and owner_alive(d["meta"].get("owner")) is False:
            # its process is gone (kill -9, a crash, a power cut): say so, and how to go on
            d["status"] = "interrupted"
            d["error"] = f"the process running it is gone; continue with: cave run --resume {d['id']}"
        return d

    def load(self, run_id: str) -> Trajectory:
        """Read a run back as a Trajectory (steps with their prompts, executions and usage)."""
        run = self.get_run(run_id)
        rid = run["id"]
        with self.engine.connect() as conn:
            msg_rows = conn.execute(select(messages).where(messages.c.run_id == rid)).all()
            step_rows = conn.execute(select(steps).where(steps.c.run_id == rid).order_by(steps.c.idx)).all()
            ex_rows = conn.execute(
                select(executions).where(executions.c.run_id == rid).order_by(executions.c.step_idx, executions.c.block)
            ).all()
        by_id = {}
        for m in msg_rows:
            msg = {"role": m.role, "content": m.content}
            if m.extra:
                msg.update(json.loads(m.extra))
            by_id[m.id] = msg
        blocks: dict[int, list[dict[str, Any]]] = {}
        for e in ex_rows:
            ex = Execution(
                stdout=e.stdout or "",
                stderr=e.stderr or "",
                result=e.result,
                error=None,
                duration=e.duration or 0.0,
                timed_out=bool(e.timed_out),
                recovery=e.recovery,
            )
            ex_d = ex.to_dict()
            ex_d["error"] = _loads(e.error)
            blocks.setdefault(e.step_idx, []).append({"code": e.code, "execution": ex_d, "final": bool(e.final)})
        traj_steps = []
        for s in step_rows:
            meta = _loads(s.meta) or {}
            if s.idx in blocks:
                meta["blocks"] = blocks[s.idx]
            step_blocks = meta.get("blocks") or []
            exs = [Execution.from_dict(b["execution"]) for b in step_blocks]
            traj_steps.append(
                Step(
                    index=s.idx,
                    role=s.role,
                    messages=[by_id[i] for i in json.loads(s.prompt_refs or "[]")],
                    completion=s.completion or "",
                    usage=Usage(
                        s.prompt_tokens or 0, s.completion_tokens or 0, s.total_tokens or 0, s.cached_tokens or 0
                    ),
                    finish_reason=s.finish_reason or "stop",
                    code=s.code,
                    execution=Execution.merge(exs),
                    observation=s.observation or "",
                    started_at=s.started_at or 0.0,
                    duration=s.duration or 0.0,
                    llm_duration=s.llm_duration or 0.0,
                    reward=s.reward,
                    prompt_token_ids=_loads(s.prompt_token_ids),
                    token_ids=_loads(s.token_ids),
                    logprobs=_loads(s.logprobs),
                    run_id=rid,
                    team_run_id=s.team_run_id,
                    kind=s.kind or "action",
                    meta=meta,
                )
            )
        return Trajectory(
            run_id=rid,
            task=run["task"],
            steps=traj_steps,
            status=run["status"],
            final_answer=run["final_answer"],
            error=run["error"],
            team_run_id=run["team_run_id"],
            started_at=run["created_at"],
            finished_at=run["finished_at"],
            meta=run["meta"],
        )

    def write_summary(self, run_id: str, summary: dict[str, Any]) -> Path:
        path = self.run_dir(run_id) / "summary.json"
        path.write_text(json.dumps(summary, indent=2, default=repr) + "\n", encoding="utf-8")
        return path


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL + synchronous=NORMAL: a commit survives the process being killed (not a power cut) and costs no fsync.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
