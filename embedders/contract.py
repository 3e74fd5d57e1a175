"""The embedder contract without torch: roles, prompt templates, the ``Embedder`` protocol and
input checks. The application core types against these, so commands that never embed start
without importing torch; ``embedders.base`` re-exports them beside the torch-based base class.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from embedders.errors import InvalidInputError
from embedders.scripts import blank


class Role(str, Enum):
    """What a text is used as: a search query or an indexed document."""

    QUERY = "query"
    DOCUMENT = "document"

    @classmethod
    def parse(cls, value: Role | str) -> Role:
        if isinstance(value, Role):
            return value
        try:
            return cls(str(value).lower())
        except ValueError as e:
            valid = ", ".join(r.value for r in cls)
            raise InvalidInputError(f"unknown role {value!r}; use one of: {valid}") from e


@dataclass(frozen=True)
class PromptConfig:
    """Prompt templates per role.

    Attributes:
        query: template for ``role=query``; must contain ``{text}``.
        document: template for ``role=document``; must contain ``{text}``.
        instruction_format: how a non-empty instruction is rendered into ``{instruction}``.
    """

    query: str = "{instruction}{text}"
    document: str = "{instruction}{text}"
    instruction_format: str = "{instruction}\n"

    def __post_init__(self) -> None:
        for role in ("query", "document"):
            template = getattr(self, role)
            if template.count("{text}") != 1:
                raise ValueError(f"PromptConfig.{role} must contain '{{text}}' exactly once: {template!r}")
        if "{instruction}" not in self.instruction_format:
            raise ValueError("PromptConfig.instruction_format must contain '{instruction}'")

    def split(self, role: Role, instruction: str | None) -> tuple[str, str]:
        """Render the template for ``role`` and split it around the text.

        Returns:
            (prefix, suffix): the prompt is ``prefix + text + suffix``.
        """
        template = self.query if role is Role.QUERY else self.document
        rendered_instruction = (
            # (``replace``, as the templates: ``format`` read any other brace, '{"task":
            # "{instruction}"}', as a field, a KeyError on every instructed encode)
            instruction.join(part.replace("{{", "{").replace("}}", "}")  # (format's escapes kept)
                             for part in self.instruction_format.split("{instruction}"))
            if instruction else ""
        )
        prefix, suffix = template.split("{text}")
        return (
            prefix.replace("{instruction}", rendered_instruction),
            suffix.replace("{instruction}", rendered_instruction),
        )

    def render(self, text: str, role: Role, instruction: str | None) -> str:
        prefix, suffix = self.split(role, instruction)
        return prefix + text + suffix


@runtime_checkable
class Embedder(Protocol):
    """What every embedder offers to the indexer, the search service and the evaluator, and all
    a plugin's model needs (docs/plugins.md; it need not subclass the torch-based BaseEmbedder).

    ``name`` is the name it is registered under (collections record vectors by it); ``identity``
    a JSON object string that changes whenever its vectors would; ``encode`` returns float32
    ``(len(texts), dim)`` and raises ``InvalidInputError`` for texts it cannot take.
    ``show_progress`` is optional: callers pass it only to an ``encode`` that accepts it.
    """

    name: str

    @property
    def dim(self) -> int: ...

    @property
    def identity(self) -> str: ...

    def encode(
        self,
        texts: Sequence[str],
        *,
        role: Role | str = Role.DOCUMENT,
        instruction: str | None = None,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray: ...


@runtime_checkable
class EncodesFromPlain(Protocol):
    """An embedder whose vectors under an instruction blend in its vectors of the same texts read
    bare (``instruction_weight`` under 1): given those (a collection's stored ones), it returns
    what ``encode`` would, reading the texts under the instruction only.

    The search service's rerank asks it of the embedder that wrote a collection's vectors, so
    how the blend is made stays the embedder's (the service built it itself, loading a second
    model at ``instruction_weight=1`` for the instructed half).
    """

    def encode_from_plain(
        self,
        plain: np.ndarray,
        texts: Sequence[str],
        *,
        role: Role | str = Role.DOCUMENT,
        instruction: str | None = None,
        batch_size: int = 32,
    ) -> np.ndarray: ...


class BlendsInstruction:
    """``EncodesFromPlain`` for an embedder whose ``config.instruction_weight`` w makes its vector
    of a text under an instruction ``normalize((1 - w) n(bare) + w n(instructed))`` (``n``: unit
    length; ``embedders.pooling.blend_instruction``), where ``bare`` is what ``encode`` returns
    without one. The instructed half is ``encode`` of a shallow copy at w = 1: the same loaded
    model (backbone, tokenizer), no second one.
    """

    config: Any

    def reads_bare(self, instruction: str | None) -> bool:
        """Whether ``encode`` reads the texts under ``instruction`` exactly as without one."""
        return validate_instruction(instruction) is None

    def encode_from_plain(
        self,
        plain: np.ndarray,
        texts: Sequence[str],
        *,
        role: Role | str = Role.DOCUMENT,
        instruction: str | None = None,
        batch_size: int = 32,
    ) -> np.ndarray:
        """What ``encode(texts, role=role, instruction=instruction)`` returns (to float rounding),
        given ``plain``, its ``(len(texts), dim)`` vectors of the texts without an instruction.

        Raises:
            InvalidInputError: as ``encode``, or ``plain`` has not one row per text.
        """
        items = validate_texts(texts)
        plain = np.asarray(plain, dtype=np.float32)
        if plain.ndim != 2 or plain.shape[0] != len(items):
            raise InvalidInputError(f"plain must hold one row per text: {len(items)} texts, shape {plain.shape}")
        plain = plain / np.maximum(np.linalg.norm(plain, axis=1, keepdims=True), 1e-12)
        weight = float(self.config.instruction_weight)
        if self.reads_bare(instruction) or weight == 0.0:
            return plain
        half = self
        if weight != 1.0:
            half = copy.copy(self)  # shares the model; only the config (a dataclass) is its own
            half.config = dataclasses.replace(self.config, instruction_weight=1.0)
        instructed = cast(Embedder, half).encode(items, role=role, instruction=instruction, batch_size=batch_size)
        if weight == 1.0:
            return instructed
        blend = (1.0 - weight) * plain + weight * instructed
        return (blend / np.maximum(np.linalg.norm(blend, axis=1, keepdims=True), 1e-12)).astype(np.float32)


# Bytes of UTF-8 a text may have over the tokens it takes (a token of the tokenizers used reads
# at least one byte; a word-start marker and the merge with the prompt add a few): a text of no
# more bytes than a budget less this is read whole without tokenising it (``may_be_cut``).
BYTES_OVER_TOKENS = 8


def may_be_cut(texts: Sequence[str], budget: int) -> list[str]:
    """The texts of ``texts`` that may take more than ``budget`` tokens: the only ones worth
    tokenising to count what is cut (``texts_cut``, a clustering's count of its cut texts);
    the others are read whole (``BYTES_OVER_TOKENS``)."""
    return [t for t in texts if len(t.encode("utf-8", "surrogatepass")) + BYTES_OVER_TOKENS > budget]

# A token is read from at most this many characters of a text: anything past ``max_length``
# times it is never read, so it is not tokenised (a 15 MB text took ~50 s to tokenise whole).
CHARS_PER_TOKEN_BOUND = 32

# Why a tokenizer reads a text as mostly its unknown token, as every warning of it says: all-
# MiniLM's WordPiece has no pieces for Thai or emoji, and makes one unknown token of any word of
# over 100 characters (a hash, base64), which the warning blamed on "a script" too.
UNREAD_WHY = ("(a script or symbols it does not read, such as Thai or emoji, or unbroken strings "
              "too long for it to split, such as hashes or base64)")


@runtime_checkable
class HasTokenizer(Protocol):
    """An embedder that exposes its tokenizer (to cut chunks and count tokens the way it reads).

    ``tokenizer`` is a Hugging Face tokenizer, or None for an embedder without one.
    """

    max_length: int

    @property
    def tokenizer(self) -> Any: ...


def validate_texts(texts: Any) -> list[str]:
    """Check ``texts`` is a sequence of strings and return it as a list.

    Raises:
        InvalidInputError: for None, a bare string, or any non-string item (its index is named).
    """
    if texts is None:
        raise InvalidInputError("texts is None; pass a list of strings (an empty list is fine)")
    if isinstance(texts, str | bytes):
        raise InvalidInputError(
            "texts must be a list of strings, not a single string; wrap it: encode([text])"
        )
    try:
        items = list(texts)
    except TypeError as e:
        raise InvalidInputError(
            f"texts must be a list of strings, got {type(texts).__name__}"
        ) from e
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidInputError(
                f"texts[{i}] is {type(item).__name__} ({item!r:.40}), not str; every item must be a string"
            )
        check_encodable(item, f"texts[{i}]")
    return items


def check_encodable(text: str, where: str) -> None:
    """``InvalidInputError`` unless ``text`` can be encoded. A Python string can hold what no
    text encoding can: an unpaired surrogate (JSON's ``"\\ud800"`` decodes to one), on which
    tokenizers fail with a TypeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInputError(
            f"{where} holds an unpaired surrogate ({text[e.start]!r} at character {e.start}), "
            "which is not Unicode text; send the text as valid UTF-8 / paired \\u escapes"
        ) from None


def validate_instruction(instruction: Any) -> str | None:
    if instruction is None:
        return None
    if not isinstance(instruction, str):
        raise InvalidInputError(
            f"instruction must be a string or None, got {type(instruction).__name__}"
        )
    check_encodable(instruction, "the instruction")
    # Invisible characters alone are no instruction, as they are no text (``blank``): a zero-width
    # space was rendered into the prompt, and a search took it for an instruction (dense, not
    # hybrid, "instruction_read": true).
    return None if blank(instruction) else instruction.strip()


# Identity fields that change how vectors are computed but not what they mean: the precision a
# GPU worker runs at (bf16 beside a CPU's fp32) and GIRCSE's KV cache (tested equal without it).
def check_instruction_weight(weight: float) -> None:
    """ValueError unless an ``instruction_weight`` (the instructed embedding's share) is in [0, 1]."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"instruction_weight must be from 0 to 1, got {weight}")


# instruction_weight: how an encoder-mean embedder mixes its query under an instruction; the
# documents a collection holds are embedded without one, so they stay comparable.
COMPARABLE_ACROSS = frozenset({"dtype", "use_cache", "instruction_weight"})


def identity_changes(recorded: str, current: str, ignore: frozenset[str] = frozenset()) -> list[str]:
    """What differs between two ``Embedder.identity`` strings, as field names (``weights`` for
    retrained weights); empty when vectors made under ``recorded`` and ``current`` are comparable.
    ``ignore`` names fields the caller knows do not matter for its texts (``max_length`` for a
    short query against documents embedded at another budget).

    A collection records the identity of each embedder that wrote it; a retrained checkpoint,
    or a served option changed (``max_length``), keeps the name but not the vectors' meaning.
    ``recorded`` empty (nothing was recorded) compares equal to anything. A setting added in a
    later version defaults to what the earlier one did, so a trained method's field only one side
    has is compared with its config's default (GIRCSE's ``soft_temperature`` at 1 matches a
    collection indexed before the option existed, at 1.5 it does not); any other field only one
    side has is not compared.
    A trained method's settings sit under ``config`` in its identity; they are compared one by
    one, by their own names, and those its config class marks training-only
    (``TRAINING_ONLY``: a loss temperature, GIRCSE's training K) do not count.
    """
    if not recorded or recorded == current:
        return []
    try:
        old, new = _identity_fields(json.loads(recorded)), _identity_fields(json.loads(current))
    except ValueError:
        return ["identity"]
    if old is None or new is None:
        return ["identity"]
    skip = COMPARABLE_ACROSS | ignore
    if old.get("method") == new.get("method") and isinstance(new.get("method"), str):
        from embedders.registry import config_defaults, training_only_fields  # the methods register there

        skip = skip | training_only_fields(new["method"])
        defaults = config_defaults(new["method"])
        old = {**{k: defaults[k] for k in new.keys() - old.keys() if k in defaults}, **old}
        new = {**{k: defaults[k] for k in old.keys() - new.keys() if k in defaults}, **new}
    keys = sorted((old.keys() & new.keys()) - skip)
    return [k for k in keys if old.get(k) != new.get(k)]


def _identity_fields(identity: Any) -> dict[str, Any] | None:
    """An identity's fields with a trained method's ``config`` spread among them (None if it is
    not a JSON object)."""
    if not isinstance(identity, dict):
        return None
    config = identity.get("config")
    if not isinstance(config, dict):
        return identity
    return {**{k: v for k, v in identity.items() if k != "config"}, **config}
