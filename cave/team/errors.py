"""The team's errors: a wrong team/role definition (a config error, with file:line and the fix) and a backend that
could not be started."""

from __future__ import annotations

from cave.config import ConfigError

__all__ = ["BackendStartError", "TeamError"]


class TeamError(ConfigError):
    """A team or role definition is wrong. ``str()`` lists each problem as FILE:LINE: FIELD: message, then the fix."""


class BackendStartError(RuntimeError):
    """A valid team's backend could not be created (a missing package or model file, a bad option)."""
