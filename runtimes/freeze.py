"""Freezing an idle kernel (``freeze_idle``): nothing of it runs between calls, at no cost to calls in a row.

The kernel is stopped (SIGSTOP) once no call has been in flight for ``FREEZE_AFTER_S`` and continued (SIGCONT)
when the next call starts. An agent's calls come in bursts (a cell, then ``describe()``, then a retrieve): within
a burst the kernel is never stopped, so those calls pay no signal and no wake-up of the kernel's threads (stopping
and continuing its ~11 threads on every call cost a trivial cell ~0.15 ms, half its round trip). A kernel idle
for longer pays both signals, against an idle gap of at least ``FREEZE_AFTER_S``. What a cell left behind
(threads, timers, event-loop callbacks) runs at most ``FREEZE_AFTER_S`` past the end of a call.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

__all__ = ["FREEZE_AFTER_S", "IdleFreezer"]

FREEZE_AFTER_S = 0.005


class IdleFreezer:
    """``enter()`` when a call starts, ``leave()`` when it ends; ``send(signum)`` signals the current kernel.

    >>> sent = []
    >>> f = IdleFreezer(sent.append, after_s=0.01)
    >>> f.enter(); f.leave(); f.enter(); f.leave()   # calls in a row: nothing sent
    >>> sent
    []
    >>> time.sleep(0.2); sent == [signal.SIGSTOP]   # idle: stopped
    True
    >>> f.enter(); sent[-1] == signal.SIGCONT         # the next call continues it first
    True
    >>> f.leave(); f.close()
    """

    def __init__(self, send: Callable[[int], None], after_s: float = FREEZE_AFTER_S) -> None:
        self._send = send
        self.after_s = after_s
        self._cond = threading.Condition(threading.Lock())
        self._in_call = False
        self._idle = False  # the thread waits with no deadline: the next leave() must wake it
        self._deadline: float | None = None  # when to stop the kernel, if no call starts before
        self._frozen = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def enter(self) -> None:
        with self._cond:
            self._in_call, self._deadline = True, None
            if self._frozen:
                self._frozen = False
                self._send(signal.SIGCONT)

    def leave(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._in_call, self._deadline = False, time.monotonic() + self.after_s
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="cave-freeze-idle", daemon=True)
                self._thread.start()
            elif self._idle:  # a thread already waiting for a deadline finds the new one when it wakes
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                if self._deadline is None:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._deadline = None
                if not self._in_call and not self._frozen:
                    self._frozen = True
                    self._send(signal.SIGSTOP)
