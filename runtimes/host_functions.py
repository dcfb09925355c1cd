"""Host functions: functions that stay in the host process and are called from code running in a kernel.

``runtime.inject_function(fn, host=True)`` gives the kernel a *proxy* with ``fn``'s name, signature and
docstring (``describe()`` and the agent's prompt show it like any injected function). Calling the proxy sends
a ``host_call`` frame on the control channel while the cell runs; the host runs the real ``fn`` in a worker
thread (a blocking function does not stall the host's event loop) and answers with a ``host_result`` frame:
the return value, or the exception's type name and message. A plain injected function would be pickled by
value and the kernel would call a *copy* of it: a recorder's list or a tool relay's queue would stay behind.

Arguments and results cross as JSON only, both ways: the host never unpickles anything the kernel sends
(the kernel is hostile input, see docs/threat-model.md). The host runs only functions registered under the
name the frame gives, with the JSON arguments it gives, which is what a JSON tool-calling agent can do too.
The cell's timeout stays absolute: a host call in progress does not extend it (the host stops waiting for the
function, which finishes in its thread, and its result is dropped).

In the kernel, an exception from the host is raised again as the class the kernel's namespace (or builtins)
knows by that name, e.g. an injected ``ToolError`` type; otherwise as a RuntimeError naming the type. An
exception that is not an ``Exception`` on the host (a signal to stop) becomes ``HostCallAborted``, which
``except Exception`` does not swallow.

This module runs on both sides: ``describe_function`` and ``serve`` on the host, ``make_proxy`` in the kernel.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import json
import time
from collections.abc import Callable
from typing import Any

MAX_MESSAGE_CHARS = 10_000  # of an exception message sent to the kernel
MAX_CALL_CHARS = 16 << 20  # of a call's JSON arguments (the host's frame limit is larger: a legal call never breaks it)
_JSON_TYPES = "str, int, float, bool, None, and lists and dicts of them"


class HostCallAborted(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt
    """The host function stopped with something that is not an Exception (the host is ending the run)."""


# -- the host side ------------------------------------------------------------------------------------------
def describe_function(name: str, fn: Callable[..., Any]) -> dict[str, Any]:
    """What the kernel needs to build the proxy, as JSON: the name, docstring and signature (as text)."""
    try:
        sig: inspect.Signature | None = inspect.signature(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: show them as written
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None  # a builtin without a signature: (*args, **kwargs)
    params = [
        {"name": "args", "kind": int(inspect.Parameter.VAR_POSITIONAL), "default": None, "annotation": None},
        {"name": "kwargs", "kind": int(inspect.Parameter.VAR_KEYWORD), "default": None, "annotation": None},
    ]
    returns = None
    if sig is not None:
        params = [
            {
                "name": p.name,
                "kind": int(p.kind),
                "default": None if p.default is p.empty else repr(p.default)[:200],
                "annotation": None if p.annotation is p.empty else inspect.formatannotation(p.annotation),
            }
            for p in sig.parameters.values()
        ]
        returns = None if sig.return_annotation is sig.empty else inspect.formatannotation(sig.return_annotation)
    return {"name": name, "doc": fn.__doc__, "params": params, "returns": returns}


async def answer(
    frame: dict[str, Any], functions: dict[str, Callable[..., Any]], deadline: float | None, serve: bool = True
) -> dict[str, Any] | None:
    """The ``host_result`` frame answering a ``host_call`` frame from the kernel, or None when ``deadline``
    (monotonic) passed while the function ran. ``serve=False``: an error saying the cell is past its timeout."""
    call = frame.get("call")
    if not isinstance(call, int) or isinstance(call, bool):
        call = -1  # answered all the same, for no call the kernel waits on
    if not serve:
        return _error(call, "TimeoutError", "the cell ran past its timeout: no more host calls")
    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    name, args, kwargs = frame.get("name"), frame.get("args"), frame.get("kwargs")
    fn = functions.get(name) if isinstance(name, str) else None
    if fn is None:
        return _error(call, "NameError", f"no host function named {str(name)[:100]!r} is registered")
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return _error(call, "TypeError", "a host call needs a list of arguments and a dict of keyword arguments")
    task = asyncio.ensure_future(asyncio.to_thread(_outcome, fn, args, kwargs))
    done, _ = await asyncio.wait({task}, timeout=timeout)  # never cancels the call: a thread cannot be stopped
    if not done:
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no "never retrieved" warning
        return None
    value, error = task.result()
    if error is not None:  # the function's own error goes to the kernel
        return _error(call, type(error).__name__, str(error), fatal=not isinstance(error, Exception))
    try:
        json.dumps(value)  # checked here: the frame is encoded again when sent
    except (TypeError, ValueError, RecursionError) as e:
        return _error(
            call, "TypeError", f"host function {name} returned a {type(value).__name__} that is not JSON ({e})"
        )
    return {"op": "host_result", "call": call, "ok": True, "value": value}


def _outcome(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """Run in the worker thread: every exception is caught there (a SystemExit or KeyboardInterrupt reaching
    asyncio would stop the host's event loop)."""
    try:
        return fn(*args, **kwargs), None
    except BaseException as e:  # noqa: BLE001 - reported to the kernel
        return None, e


def _error(call: int, type_name: str, message: str, fatal: bool = False) -> dict[str, Any]:
    error = {"type": type_name, "message": message[:MAX_MESSAGE_CHARS], "fatal": fatal}
    return {"op": "host_result", "call": call, "ok": False, "error": error}


# -- the kernel side ----------------------------------------------------------------------------------------
class _Shown(str):
    """Text shown as itself in a signature (a default's or an annotation's repr from the host)."""

    def __repr__(self) -> str:
        return str(self)


def _signature(spec: dict[str, Any]) -> inspect.Signature:
    params = []
    for p in spec["params"]:
        default = inspect.Parameter.empty if p["default"] is None else _Shown(p["default"])
        annotation = inspect.Parameter.empty if p["annotation"] is None else _Shown(p["annotation"])
        params.append(
            inspect.Parameter(p["name"], inspect._ParameterKind(p["kind"]), default=default, annotation=annotation)
        )
    returns = inspect.Signature.empty if spec.get("returns") is None else _Shown(spec["returns"])
    return inspect.Signature(params, return_annotation=returns)


def make_proxy(spec: dict[str, Any], call: Callable[[str, list[Any], dict[str, Any]], Any]) -> Callable[..., Any]:
    """The kernel's stand-in for a host function: checks the arguments against the signature (a wrong call
    fails here, like a real one), then ``call(name, args, kwargs)`` sends them to the host."""
    name = spec["name"]
    sig = _signature(spec)

    def proxy(*args: Any, **kwargs: Any) -> Any:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{name}{sig}: {e}") from None
        return call(name, list(args), kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    proxy.__signature__ = sig  # type: ignore[attr-defined]
    proxy.__doc__ = spec.get("doc")
    proxy.__module__ = "__main__"
    return proxy


def encode_call(call: int, name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ``host_call`` frame; a TypeError that says what to do when an argument is not JSON."""

    def refuse(value: Any) -> Any:
        if callable(value) and not isinstance(value, type):  # a lambda for "the function y = x^3"
            raise TypeError(
                f"{name}() got a Python function ({getattr(value, '__name__', type(value).__name__)}): a function "
                f"cannot be sent to a host function. Where a parameter takes a formula or an expression, pass it "
                f"as text, e.g. 'x**3'"
            )
        raise TypeError(
            f"{name}() got an argument of type {type(value).__name__}: host functions take JSON values only "
            f"({_JSON_TYPES}); convert it first, e.g. with .tolist(), int(), float() or str()"
        )

    try:
        size = len(json.dumps([args, kwargs], default=refuse))
    except ValueError as e:  # a circular reference
        raise TypeError(f"{name}(): the arguments cannot be sent to the host as JSON ({e})") from None
    if size > MAX_CALL_CHARS:
        raise ValueError(
            f"{name}(): the arguments are {size:,} characters of JSON, more than a host call takes "
            f"({MAX_CALL_CHARS:,}); pass less data, e.g. a summary or a file name"
        )
    return {"op": "host_call", "call": call, "name": name, "args": args, "kwargs": kwargs}


def result_of(reply: dict[str, Any], namespace: dict[str, Any]) -> Any:
    """The value of a ``host_result`` frame, or its exception raised as a class the kernel knows."""
    if reply.get("ok"):
        return reply.get("value")
    error = reply.get("error") or {}
    type_name, message = str(error.get("type", "Exception")), str(error.get("message", ""))
    if error.get("fatal"):
        raise HostCallAborted(f"{type_name}: {message}")
    cls = namespace.get(type_name, getattr(builtins, type_name, None))
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            exc = cls(message)
        except Exception:  # noqa: BLE001 - a class that wants other arguments: fall back below
            exc = None
        if exc is not None:
            raise exc
    raise RuntimeError(f"{type_name}: {message}")
