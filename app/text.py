"""Small wording helpers shared by the edges (CLI, UI) and the services' messages."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 document``, ``2 documents``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
