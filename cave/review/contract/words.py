"""The words every contract rule shares: identifiers, and function words that end a noun phrase."""

from __future__ import annotations

__all__ = ["IDENT", "STOP"]

IDENT = r"[A-Za-z_][\w]*"
STOP = frozenset(
    "and or with in for from where that which who whose sorted ordered ranked as over during between of "
    "on is are was were has have had showing rounded to across per by the a an than when if then using "
    "did does do got get gets at after before since until only each every s it its their them this these "
    "those there be been will would can should must not also into onto along plus excluding including "
    "give return too overall here now please separately respectively combined alone".split()
)
