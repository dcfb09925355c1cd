"""Text from a kernel or a model, made safe to print on a terminal.

Code an agent runs can print anything, and a model can write anything: an escape sequence that sets the user's
clipboard (OSC 52), retitles the window, moves the cursor over earlier output or hides text. Everything cave shows
from them goes through ``safe``: control characters other than newline and tab become visible escapes.

    >>> safe("ok\\n\\tindented")
    'ok\\n\\tindented'
    >>> safe("\\x1b]52;c;aGk=\\x07done")
    '\\\\x1b]52;c;aGk=\\\\x07done'
    >>> safe("a\\rb\\x9bc")
    'a\\\\x0db\\\\x9bc'
"""

from __future__ import annotations

import re

__all__ = ["safe"]

# C0 controls except \t and \n, DEL, and the C1 controls (0x80-0x9f: 0x9b is a one-byte CSI on some terminals)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: object) -> str:
    """``str(text)`` with every terminal control character except newline and tab shown as ``\\xNN``."""
    s = text if isinstance(text, str) else str(text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)
