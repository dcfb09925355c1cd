"""The host survives whatever the kernel does: a kernel is hostile input, in process and sandbox mode alike.

The attacks on the host itself (hang, crash, memory, disk, a bricked runtime) are in host_harm.py, shared with
``python -m cave.benchmarks.reliability``; each must leave the host fine and the runtime working.
"""

from __future__ import annotations

import os

import pytest
from cave.runtimes import create_runtime

from tests.security.host_harm import HARMS


@pytest.mark.parametrize("mode", ["process", "sandbox"])
@pytest.mark.parametrize("harm", HARMS, ids=[h.id for h in HARMS])
def test_the_host_survives(harm, mode):
    if mode == "sandbox":
        from tests.security.attempts import require_sandbox

        require_sandbox()
    problem = harm.run(mode)
    assert problem is None, f"{harm.id} ({harm.kind}, {mode}): {problem}"


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), -1, 0, 10**9, True])
def test_timeouts_are_validated_at_every_entry(timeout):
    rt = create_runtime("inprocess")
    with pytest.raises(ValueError, match="finite number of seconds"):
        rt.execute("1", timeout=timeout)
    with pytest.raises(ValueError, match="finite number of seconds"):
        create_runtime("inprocess", timeout=timeout)
    # the process-wide watchdog still works for every in-process runtime afterwards
    ex = rt.execute("while True:\n    pass", timeout=0.3)  # Python code: the in-process timeout stops it
    assert ex.timed_out and ex.duration < 3


def test_a_corrupt_arrow_file_is_an_error_not_a_crash(tmp_path):
    from cave.runtimes.transfer import TransferError, read_arrow

    path = tmp_path / "bad.arrow"
    path.write_bytes(b"ARROW1\x00\x00" + os.urandom(4000))
    with pytest.raises(TransferError):
        read_arrow(str(path), validate=True)


def test_the_host_bounds_what_it_takes_from_the_jupyter_channels():
    """Every socket of cave's zmq context refuses messages over ZMQ_MAX_MESSAGE and queues few."""
    import zmq
    from cave.runtimes.kernel_process import ZMQ_MAX_MESSAGE, ZMQ_QUEUE, zmq_context

    ctx = zmq_context()
    pull = ctx.socket(zmq.PULL)
    try:
        assert pull.getsockopt(zmq.MAXMSGSIZE) == ZMQ_MAX_MESSAGE and pull.getsockopt(zmq.RCVHWM) == ZMQ_QUEUE
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        sender = zmq.Context()
        for size, delivered in ((100, True), (ZMQ_MAX_MESSAGE + 1, False)):
            push = sender.socket(zmq.PUSH)
            push.connect(f"tcp://127.0.0.1:{port}")
            push.send(b"x" * size)
            arrived = pull.poll(1500) != 0 and len(pull.recv()) == size
            push.close(linger=0)
            assert arrived == delivered, size  # an oversized message never reaches the host's queue
        sender.term()
    finally:
        pull.close(linger=0)


def test_skills_work_in_the_sandbox(tmp_path):
    """The jail shows the bundled skills (cave's folders) and a run's own skill folders, read-only."""
    from tests.security.attempts import require_sandbox

    require_sandbox()
    from cave.skills import SkillSet

    folder = tmp_path / "skills" / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: says hello\n---\nSay hello politely.\n")
    rt = create_runtime("sandbox", timeout=30)
    try:
        SkillSet([str(tmp_path / "skills")]).install(rt)
        ex = rt.execute("print(activate_skill('greet'))\nprint(activate_skill('sql')[:40])")
        assert ex.error is None and "Say hello politely." in ex.stdout and "Skill 'sql' is active" in ex.stdout
        assert rt.execute(f"open({str(folder / 'x')!r}, 'w')").error is not None  # read-only
    finally:
        rt.close()
