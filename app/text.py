"""Small wording helpers shared by the edges (CLI, UI) and the services' messages, and the one
rule for texts to embed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.errors import InvalidRequestError
from embedders.contract import check_encodable
from embedders.errors import InvalidInputError


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 document``, ``2 documents``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def check_texts(texts: Sequence[Any], name: str = "texts") -> None:
    """Every text to embed or cluster is a string with something in it (and text: no unpaired
    surrogate), as every document to
    index and every query must be: an empty text has no meaning to embed (the vector would be
    the prompt's alone), and the HTTP API's OpenAI-style ``input`` refuses it too.

    Raises:
        InvalidRequestError: naming the first item that is not a string or is blank.
    """
    for i, item in enumerate(texts):
        if not isinstance(item, str):
            raise InvalidRequestError(f"{name}[{i}] is {type(item).__name__} "
                                      f"({json.dumps(item, default=str)[:40]}), not a string; "
                                      "every text must be a string")
        if not item.strip():
            raise InvalidRequestError(f"{name}[{i}] is empty; every text must contain something "
                                      "to embed")
        check_text_encodable(item, f"{name}[{i}]")


def check_text_encodable(text: str, where: str) -> None:
    """``InvalidRequestError`` for a string holding an unpaired surrogate (not Unicode text)."""
    try:
        check_encodable(text, where)
    except InvalidInputError as e:
        raise InvalidRequestError(str(e)) from None
