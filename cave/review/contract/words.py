"""The words every contract rule shares: identifiers, and function words that end a noun phrase."""

from __future__ import annotations

__all__ = ["IDENT", "STOP", "stem"]

IDENT = r"[A-Za-z_][\w]*"
STOP = frozenset(
    "and or with in for from where that which who whose sorted ordered ranked as over during between of "
    "on is are was were has have had showing rounded to across per by the a an than when if then using "
    "did does do got get gets at after before since until only each every s it its their them this these "
    "those there be been will would can should must not also into onto along plus excluding including "
    "give return too overall here now please separately respectively combined alone".split()
)


def stem(word: str) -> str:
    """A plural's singular, near enough to compare words ("cities" -> "city", "orders" -> "order").

    >>> stem("cities"), stem("boxes"), stem("orders"), stem("gas")
    ('city', 'box', 'order', 'gas')
    """
    for suffix in ("ies", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word
