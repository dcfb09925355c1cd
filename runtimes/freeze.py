"""Freezing an idle kernel (``freeze_idle``): nothing of it runs between calls.

The kernel is stopped (SIGSTOP) in the caller's thread as each call ends, before the call returns, and continued
(SIGCONT) when the next call starts. What a cell left behind (threads, timers, event-loop callbacks, signal
handlers) runs only while a call is in flight.

Why not later: a stop deferred by a few milliseconds (so that calls in a row pay no signals) depended on a host
thread being scheduled on time; a host busy in a long GIL hold (a full garbage collection of a big heap) let a
callback a cell had scheduled 0.3 s ahead run while no call was in flight. The price of stopping at once is the
wake-up of the kernel's ~12 threads on each call: ~0.1 ms of a trivial cell's round trip in sandbox mode
(``python -m cave.benchmarks.perf.runtime``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

__all__ = ["IdleFreezer"]


class IdleFreezer:
    """``enter()`` when a call starts, ``leave()`` when it ends; ``send(signum)`` signals the current kernel.

    >>> sent = []
    >>> f = IdleFreezer(sent.append)
    >>> f.enter(); sent                     # never stopped yet: nothing to continue
    []
    >>> f.leave(); sent == [signal.SIGSTOP]  # stopped before leave() returns
    True
    >>> f.enter(); sent[-1] == signal.SIGCONT
    True
    >>> f.leave(); f.close(); f.enter(); f.leave(); len(sent)  # closed: no more signals
    3
    """

    def __init__(self, send: Callable[[int], None]) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._frozen = False
        self._closed = False

    def enter(self) -> None:
        with self._lock:
            if self._frozen and not self._closed:
                self._frozen = False
                self._send(signal.SIGCONT)

    def leave(self) -> None:
        with self._lock:
            if not self._frozen and not self._closed:
                self._frozen = True
                self._send(signal.SIGSTOP)

    def close(self) -> None:
        with self._lock:
            self._closed = True
