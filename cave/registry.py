"""One registry for every pluggable part: backends, runtimes, patterns, engines, estimators, rewards, trackers.

A ``Registry`` maps names to things. Registering a taken name is an error (two plugins fighting over one name
should fail loudly, not silently replace each other); looking up an unknown name says what is known and what was
probably meant. Built-in entries can live in modules that are imported lazily (a backend that imports llama.cpp):
``builtins`` names them and ``loader`` imports them on the first lookup, so listing names costs nothing.

    >>> COLORS: Registry[str] = Registry("color")
    >>> @COLORS.register("red")
    ... def red() -> str:
    ...     return "#f00"
    >>> COLORS.get("red")()
    '#f00'
    >>> COLORS.get("rde")
    Traceback (most recent call last):
    ...
    cave.registry.UnknownName: unknown color 'rde'; did you mean 'red'? known colors: red
    >>> COLORS.names()
    ['red']

This module imports nothing from cave: every layer (runtimes included) may use it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["DuplicateName", "Registry", "UnknownName", "did_you_mean"]


class UnknownName(KeyError, ValueError):
    """A name nobody registered. A KeyError (mapping lookups) and a ValueError (pydantic validators) at once."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0]) if self.args else ""


class DuplicateName(ValueError):
    """A second registration under a name that is already taken."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A hint naming the closest known name, or "" when nothing is close.

    >>> did_you_mean("locl", ["local", "openai"])
    "did you mean 'local'? "
    >>> did_you_mean("zzz", ["local"])
    ''
    """
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


class Registry(Generic[T]):
    """Named entries of one kind, with duplicate-name rejection and did-you-mean lookups.

    ``kind`` names the entries in messages ("backend", "runtime"). ``builtins`` are names known before their
    modules are imported; ``loader`` is called once, on the first lookup of a name not yet registered, to
    import the modules that register them.
    """

    def __init__(self, kind: str, *, builtins: Iterable[str] = (), loader: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._builtins = tuple(builtins)
        self._loader = loader
        self._loaded = loader is None

    def register(self, name: str, *, replace: bool = False, name_attr: str | None = None) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")``. ``replace=True`` overrides an entry on purpose (tests).
        ``name_attr``: a class registered this way also carries its name in that attribute (``cls.name``).

        >>> SHAPES: Registry[type] = Registry("shape")
        >>> @SHAPES.register("circle", name_attr="name")
        ... class Circle: ...
        >>> Circle.name
        'circle'
        """

        def deco(entry: T) -> T:
            self.add(name, entry, replace=replace)
            if name_attr and isinstance(entry, type):
                setattr(entry, name_attr, name)
            return entry

        return deco

    def add(self, name: str, entry: T, *, replace: bool = False) -> None:
        """Register ``entry`` under ``name``; a taken name raises DuplicateName unless ``replace``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string; got {name!r}")
        old = self._entries.get(name)
        if old is not None and old is not entry and not replace and not _same_definition(old, entry):
            raise DuplicateName(
                f"{self.kind} {name!r} is already registered (by {_where(old)}); pick another name, "
                f"or pass replace=True to override it on purpose"
            )
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        """Forget ``name`` (tests that register temporary entries)."""
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """The entry registered as ``name``; UnknownName with the closest name and the known ones otherwise."""
        if name not in self._entries:
            self._load()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise self.unknown(name) from None

    def check(self, name: str) -> str:
        """``name`` if it is known (registered or built in), without importing the built-ins; else UnknownName."""
        if name in self._entries or name in self._builtins:
            return name
        self._load()
        if name in self._entries:
            return name
        raise self.unknown(name)

    def unknown(self, name: object) -> UnknownName:
        known = self.names()
        hint = did_you_mean(name, known) if isinstance(name, str) else ""
        return UnknownName(f"unknown {self.kind} {name!r}; {hint}known {self.kind}s: {', '.join(known) or '(none)'}")

    def names(self) -> list[str]:
        """Every known name, sorted: built-ins (imported or not) and registered ones."""
        return sorted(set(self._entries) | set(self._builtins))

    def items(self) -> list[tuple[str, T]]:
        self._load()
        return sorted(self._entries.items())

    def _load(self) -> None:
        if not self._loaded and self._loader is not None:
            self._loaded = True
            self._loader()

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._builtins

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()})"


def _where(entry: object) -> str:
    module = getattr(entry, "__module__", None) or type(entry).__module__
    qualname = getattr(entry, "__qualname__", None) or type(entry).__qualname__
    return f"{module}.{qualname}"


def _same_definition(old: object, new: object) -> bool:
    """The same function or class defined again: a module reloaded, or run as ``python -m pkg.mod`` while its
    package imports it too (``__main__.f`` and ``pkg.mod.f``). Not a conflict between two plugins."""
    if not (hasattr(old, "__qualname__") and hasattr(new, "__qualname__")):
        return False  # two instances (values, not definitions): only the very same object is no conflict
    if _where(old) == _where(new):
        return True
    same_name = getattr(old, "__qualname__", object()) == getattr(new, "__qualname__", None)
    return same_name and "__main__" in (getattr(old, "__module__", None), getattr(new, "__module__", None))
