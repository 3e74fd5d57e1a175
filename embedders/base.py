"""The ``Embedder`` contract and the shared ``encode`` every embedder inherits.

``BaseEmbedder.encode`` is a template method: it validates input, sorts texts by
length, batches them, runs each batch under ``torch.inference_mode`` (halving the
batch on a GPU out-of-memory error), L2-normalises and returns float32 ``(n, dim)``.
A method implements one seam, ``_embed_batch``, which turns a list of texts into a
``(batch, dim)`` tensor.

Prompts: each embedder has a ``PromptConfig`` with one template per role. A template
contains ``{text}`` and may contain ``{instruction}``; a non-empty instruction is
rendered through ``instruction_format`` before being put in its place, an absent one
renders as nothing.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embedders.contract import (  # noqa: F401 (re-exported: the contract's historical home)
    CHARS_PER_TOKEN_BOUND,
    UNREAD_WHY,
    BlendsInstruction,
    Embedder,
    HasTokenizer,
    PromptConfig,
    Role,
    may_be_cut,
    validate_instruction,
    validate_texts,
)
from embedders.errors import InvalidInputError

logger = logging.getLogger(__name__)

CONFIG_FILE = "facet_config.json"
# The layout of a checkpoint folder this Facet writes and reads (``format_version`` in CONFIG_FILE;
# a config without it is from before it was written, the same layout).
FORMAT_VERSION = 1


def check_format_version(meta: Any, directory: Path) -> None:
    """Refuse a parsed checkpoint config whose ``format_version`` this Facet cannot read: one
    saved by a newer Facet (its folder may hold files this one would ignore or misread), or one
    that is not a positive whole number. A config that is not an object is left to the caller.

    Raises:
        CheckpointError: the version is newer than FORMAT_VERSION, or not a version at all.
    """
    from embedders.errors import CheckpointError

    if not isinstance(meta, dict):
        return
    version = meta.get("format_version", FORMAT_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CheckpointError(f"{directory / CONFIG_FILE} has format_version {version!r}, which is not a "
                              f"checkpoint format (this Facet reads format {FORMAT_VERSION}); the "
                              "checkpoint is damaged")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{directory} was saved in checkpoint format {version} by a newer Facet; this "
                              f"one reads format {FORMAT_VERSION}: upgrade Facet to load it")


# A save's leftover ``.NAME.new-*`` folder older than this is a killed save's, not one still
# being written (a save takes seconds): what a run into that output removes.
PARTIAL_SAVE_AGE_S = 600.0


def recover_checkpoint(out_dir: str | Path, partial_older_than_s: float | None = None) -> bool:
    """Undo a checkpoint swap that a kill interrupted between its two renames (the saved copy
    ``.NAME.old`` is complete; ``embedders.training.trainer.save_checkpoint``); True when it
    did. Every loader calls it (only ``facet train`` did, so everything else said "unknown
    embedder" for a checkpoint that was there). With ``partial_older_than_s``, also remove the
    ``.NAME.new-*`` folders of saves killed mid-write that are older than that (a save takes
    seconds; they were never cleaned).
    """
    import os
    import shutil
    import time

    target = Path(out_dir)
    if not target.name:  # "", ".", "/": no folder of its own name, so no sibling copy to swap in
        return False
    old = target.with_name(f".{target.name}.old")
    recovered = False
    if not target.exists() and old.is_dir():
        try:
            os.replace(old, target)
            recovered = True
        except OSError:  # another process recovered it first, or a read-only folder
            pass
    if partial_older_than_s is not None and target.parent.is_dir():
        now = time.time()
        for partial in target.parent.glob(f".{target.name}.new-*"):
            try:
                if now - partial.stat().st_mtime > partial_older_than_s:
                    shutil.rmtree(partial, ignore_errors=True)
            except OSError:
                continue
    return recovered


@dataclass
class TokenBatch:
    """Padded token ids for one batch plus where each row's text starts and ends."""

    input_ids: torch.Tensor  # (batch, seq)
    attention_mask: torch.Tensor  # (batch, seq)
    truncated: int = 0
    extras: dict[str, torch.Tensor] = field(default_factory=dict)

    def position_ids(self) -> torch.Tensor:
        # Left padding shifts real tokens right; positions must count real tokens only
        # or batch-of-1 and padded batches would see different rotary phases.
        return (self.attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_id: int, side: str, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad id lists into (batch, seq) ids and mask tensors on the given side."""
    if side not in ("left", "right"):
        raise ValueError(f"padding side must be 'left' or 'right', got {side!r}")
    width = max((len(s) for s in sequences), default=0)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, seq in enumerate(sequences):
        n = len(seq)
        if n == 0:
            continue
        sl = slice(width - n, width) if side == "left" else slice(0, n)
        ids[i, sl] = torch.tensor(list(seq), dtype=torch.long)
        mask[i, sl] = 1
    return ids.to(device), mask.to(device)


_TALLY = threading.local()


@dataclass
class InstructionCut:
    """What an instruction took from the texts a tokenizer cut (the truncation log names it, so
    a cut the instruction caused no longer reads as the text's fault): the most tokens an
    instruction took, the fewest tokens left for a text, and how many cut texts would have fit
    whole without the instruction."""

    tokens: int = 0
    text_room: int = 0
    fit_without: int = 0

    def add(self, other: InstructionCut) -> None:
        self.text_room = min(self.text_room, other.text_room) if self.tokens else other.text_room
        self.tokens = max(self.tokens, other.tokens)
        self.fit_without += other.fit_without


def offers_max_length(model: object) -> bool:
    """Whether ``model`` takes a ``[max_length=N]`` option (its ``OPTIONS`` name it), so that
    "raise max_length" is advice its user can follow: minilm offers none, and
    ``minilm[max_length=512]`` is refused ("has no option 'max_length'")."""
    return "max_length" in tuple(getattr(model, "OPTIONS", ()) or ())


def cut_advice(raisable: bool = True) -> str:
    """What to do about texts an embedder cut, to keep the rest of them: raise its max_length
    where it offers that option (``offers_max_length``), else split the texts (the
    advice to raise it was an error to copy for minilm)."""
    return ("raise max_length or chunk the text to keep the rest" if raisable
            else "split the texts into shorter ones to keep the rest")


def _log_truncated(name: str, count: int, total: int, budget: int, cut: InstructionCut | None = None,
                   over: str = "", raisable: bool = True) -> None:
    advice = cut_advice(raisable)
    if cut is None or not cut.tokens:
        logger.warning("%s: %d of %d texts%s were longer than %d tokens and were truncated "
                       "(%s)", name, count, total, over, budget, advice)
        return
    if not cut.fit_without:
        # None would fit without it (an index job's chunks under InBedder's default instruction):
        # "shorten the instruction" could not help.
        logger.warning("%s: %d of %d texts%s were longer than the %d tokens the instruction and the prompt "
                       "left them and were truncated: the instruction takes %d of the %d tokens the "
                       "embedder reads, and none of these texts would have fit whole without it (%s)",
                       name, count, total, over, cut.text_room, cut.tokens, budget, advice)
        return
    logger.warning("%s: %d of %d texts%s were longer than the %d tokens the instruction left them and were "
                   "truncated: the instruction takes %d of the %d tokens the embedder reads, and %d of these "
                   "texts would have fit whole without it (shorten the instruction, %s)", name, count,
                   total, over, cut.text_room, cut.tokens, budget, cut.fit_without, advice)


# Off the main thread (a server's model thread, request and job threads: where the encode calls
# of many operations meet, so that no one tally can hold an operation's), one truncation line
# per embedder (and token budget) at most this often. The texts cut meanwhile are counted, and
# said with the next line after it ("26 of 70 texts over the last 75s (12 encode calls)"), or
# when the process ends: the pieces of one POST /v1/embeddings and the batches of a server's
# index job each logged their own line (26 lines for one request, mostly "1 of 1 texts were
# truncated"). The main thread (the CLI, scripts) runs one operation at a time: one line per
# ``encode`` call or ``truncation_tally`` (an index run's).
TRUNCATION_LOG_EVERY_S = 60.0


@dataclass
class _HeldTruncation:
    """What an embedder cut since its last truncation line (logged ``at``, time.monotonic)."""

    at: float
    count: int = 0
    total: int = 0
    calls: int = 0
    cut: InstructionCut | None = None

    def add(self, count: int, total: int, cut: InstructionCut | None) -> None:
        self.count, self.total, self.calls = self.count + count, self.total + total, self.calls + 1
        if cut is not None:
            if self.cut is None:
                self.cut = InstructionCut()
            self.cut.add(cut)


# By embedder, token budget and whether it offers max_length (``cut_advice``).
_HELD: dict[tuple[str, int, bool], _HeldTruncation] = {}
_HELD_LOCK = threading.Lock()


def _over(held: _HeldTruncation, now: float) -> str:
    return f" over the last {now - held.at:.0f}s ({held.calls} encode calls)"


def _note_truncated(name: str, count: int, total: int, budget: int,
                    cut: InstructionCut | None = None, raisable: bool = True) -> None:
    """Say that ``count`` of ``total`` texts (of one ``encode`` call or tally) were cut; off the
    main thread, unless ``name`` said so in the last ``TRUNCATION_LOG_EVERY_S``: then they are
    counted towards its next line (with the texts read whole meanwhile, so its "of N" counts
    them all). ``raisable``: the embedder offers ``max_length`` (``cut_advice``)."""
    if threading.current_thread() is threading.main_thread():
        if count:
            _log_truncated(name, count, total, budget, cut, raisable=raisable)
        return
    now = time.monotonic()
    key = (name, budget, raisable)
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is not None and now - held.at < TRUNCATION_LOG_EVERY_S:
            held.add(count, total, cut)
            return
        if not count:
            return
        over = ""
        if held is not None and held.count:  # cut since the last line: said with this one
            held.add(count, total, cut)
            count, total, cut, over = held.count, held.total, held.cut, _over(held, now)
        _HELD[key] = _HeldTruncation(at=now)
    _log_truncated(name, count, total, budget, cut, over, raisable)


def flush_truncation_notes() -> None:
    """Log what was cut since each embedder's last truncation line and not said yet (the
    process ending; tests)."""
    now = time.monotonic()
    with _HELD_LOCK:
        said = [(key, held) for key, held in _HELD.items() if held.count]
        _HELD.clear()
    for (name, budget, raisable), held in said:
        _log_truncated(name, held.count, held.total, budget, held.cut, _over(held, now), raisable)


atexit.register(flush_truncation_notes)


@contextmanager
def truncation_tally() -> Iterator[None]:
    """Collect the truncation counts of the batches tokenised inside it and log them once at
    the end: one ``encode`` call (a full SciFact run logged one line per batch: 163), or one
    log window of a training run (``embedders.training.trainer``). Nested calls (an embedder
    that encodes through another, a dev evaluation inside a training window) join the
    outermost tally; each thread has its own."""
    if getattr(_TALLY, "counts", None) is not None:
        yield
        return
    _TALLY.counts = {}
    _TALLY.cuts = {}
    try:
        yield
    finally:
        counts, _TALLY.counts = _TALLY.counts, None
        cuts, _TALLY.cuts = _TALLY.cuts, None
        for (name, budget, raisable), (count, total) in counts.items():
            _note_truncated(name, count, total, budget, cuts.get((name, budget, raisable)), raisable)


def _note_instruction_cut(cut: InstructionCut | None) -> None:
    """Hand what the instruction took from the texts ``PromptTokenizer`` just cut to the
    ``_warn_truncated`` that follows it (None: it cut nothing because of an instruction)."""
    _TALLY.pending = cut


def _take_instruction_cut() -> InstructionCut | None:
    cut = getattr(_TALLY, "pending", None)
    _TALLY.pending = None
    return cut


_UNREAD = threading.local()


def _log_unread(name: str, count: int, total: int) -> None:
    logger.warning("%s: %d of %d texts are mostly unknown tokens to its tokenizer %s, so they "
                   "embed nearly alike and rank arbitrarily; use an embedder whose tokenizer reads "
                   "them (e.g. causal2vec)", name, count, total, UNREAD_WHY)


@contextmanager
def unread_tally(name: str, tokenizer: Any, texts: Sequence[str]) -> Iterator[None]:
    """Watch what ``PromptTokenizer`` reads with ``tokenizer`` inside it and log once at the end
    how many of ``texts`` were mostly its unknown token (all-MiniLM reads every Thai text and
    emoji as one ``[UNK]``: different texts embedded identically, and nothing said so). Only a
    tokenizer with an unknown token is watched; other tokenizers (a helper encoder's, as in
    Causal2Vec) are not. A nested call watches its own tokenizer until it ends."""
    if tokenizer is None or getattr(tokenizer, "unk_token_id", None) is None:
        yield
        return
    before = getattr(_UNREAD, "watch", None)
    flagged: set[str] = set()
    _UNREAD.watch = (tokenizer, flagged)
    try:
        yield
    finally:
        _UNREAD.watch = before
        if flagged:
            count = sum(1 for t in texts if t in flagged)
            if count:
                _log_unread(name, count, len(texts))


def _unread_watch(tokenizer: Any) -> set[str] | None:
    """Where to note the texts ``tokenizer`` reads as mostly unknown, or None when no
    ``unread_tally`` watches it."""
    watch = getattr(_UNREAD, "watch", None)
    return watch[1] if watch is not None and watch[0] is tokenizer else None


class BaseEmbedder(ABC):
    """Shared ``encode`` (validate, sort, batch, back off on OOM, normalise).

    Subclasses set ``name``, ``method`` and ``prompts`` and implement ``dim``,
    ``_embed_batch``, and ``_config_dict`` / ``from_pretrained`` for saving.
    """

    name: str = "base"
    method: str = "base"
    prompts: PromptConfig = PromptConfig()
    max_length: int = 512

    @property
    @abstractmethod
    def dim(self) -> int:
        """Embedding width."""

    @property
    def identity(self) -> str:
        """A string that changes whenever the embeddings would: used as a cache key."""
        return json.dumps({"method": self.method, **self._config_dict(), **self._dtype_tag()},
                          sort_keys=True, default=str)

    def _dtype_tag(self) -> dict[str, str]:
        """``{"dtype": ...}`` when the model runs below fp32 (bf16 on a GPU), else nothing, so
        reduced-precision embeddings never share cache entries with fp32 ones (and fp32 keys
        stay what they always were)."""
        spec = getattr(getattr(self, "backbone", None), "spec", None)
        dtype = getattr(spec, "dtype", torch.float32)
        return {} if dtype == torch.float32 else {"dtype": str(dtype).removeprefix("torch.")}

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    @property
    def tokenizer(self) -> Any:
        """The Hugging Face tokenizer the embedder reads text with; None when it has none."""
        return None

    @abstractmethod
    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        """Embed one batch. Returns (batch, dim); need not be normalised."""

    def encode(
        self,
        texts: Sequence[str],
        *,
        role: Role | str = Role.DOCUMENT,
        instruction: str | None = None,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Embed texts.

        Args:
            texts: the texts; an empty list gives a ``(0, dim)`` array.
            role: ``query`` or ``document``; picks the prompt template.
            instruction: free-text instruction (task description) or None.
            batch_size: texts per forward pass (halved automatically on GPU OOM).
            show_progress: draw a tqdm progress bar.

        Returns:
            float32 array of shape (len(texts), dim), each row L2-normalised.

        Raises:
            InvalidInputError: texts is None, not a list of strings, or role / batch size invalid;
                or the instruction leaves the text no room at all (one that leaves it too little
                is refused by ``check_instruction``, which the application calls first).
        """
        # Composed form (NFC): "é" as one code point or as "e" + U+0301 (macOS file names, some
        # editors) is one text; byte-level BPE tokenizers read the two forms as different tokens
        # (Causal2Vec: cosine 0.86 between the forms of one sentence, 36 tokens against 53).
        items = [unicodedata.normalize("NFC", t) for t in validate_texts(texts)]
        role_ = Role.parse(role)
        instruction_ = validate_instruction(instruction)
        if instruction_ is not None:
            instruction_ = unicodedata.normalize("NFC", instruction_)
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInputError(f"the batch size must be a positive whole number, got {batch_size!r}")
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        # Longest first: similar lengths share a batch (less padding) and an OOM shows at once.
        order = sorted(range(len(items)), key=lambda i: -len(items[i]))
        progress = None
        if show_progress:
            from tqdm.auto import tqdm

            from embedders.terminal import bar_size

            progress = tqdm(total=len(items), desc=f"encode {self.name}", unit="text", **bar_size())
        start = 0
        size = batch_size
        with torch.inference_mode(), truncation_tally(), unread_tally(self.name, self.tokenizer, items):
            while start < len(order):
                idx = order[start : start + size]
                try:
                    emb = self._embed_batch([items[i] for i in idx], role_, instruction_)
                except torch.OutOfMemoryError:
                    if size == 1:
                        raise
                    size = max(1, size // 2)
                    logger.warning("out of memory; retrying with batch_size=%d", size)
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                    continue
                emb = torch.nn.functional.normalize(emb.float(), dim=-1)
                out[idx] = emb.cpu().numpy()
                start += len(idx)
                if progress is not None:
                    progress.update(len(idx))
        if progress is not None:
            progress.close()
        return out

    def encode_query(self, texts: Sequence[str], instruction: str | None = None, **kwargs: Any) -> np.ndarray:
        return self.encode(texts, role=Role.QUERY, instruction=instruction, **kwargs)

    def encode_document(self, texts: Sequence[str], instruction: str | None = None, **kwargs: Any) -> np.ndarray:
        return self.encode(texts, role=Role.DOCUMENT, instruction=instruction, **kwargs)

    # -- token building shared by the model-backed embedders ------------------------

    def check_instruction(self, role: Role | str, instruction: str | None) -> None:
        """Refuse an instruction that takes more than half of what the prompt template leaves
        (``PromptTokenizer.instruction_limit``), before any model work.

        The application calls it for every text it encodes or answers (app/encoding.py): a
        search, rerank, clustering or embedding under an 80-word instruction read a query cut to
        a token or two, silently. ``encode`` itself refuses only an instruction that leaves no
        room at all, so that evaluation and training at a short ``max_length`` (a 14-token task
        instruction over 32 tokens) cut their texts, as they always did, and log it.

        Raises:
            InvalidInputError: the instruction is over the limit; the message names it.
        """
        tokenize = getattr(self, "_tokenize", None)
        if instruction is not None and isinstance(tokenize, PromptTokenizer):
            tokenize.check_instruction(Role.parse(role), instruction)

    def document_budget(self, instruction: str | None = None) -> int | None:
        """The most tokens of a text ``encode`` reads whole as a document (``role="document"``,
        no instruction: how an index reads its chunks), its prompt template taken off
        ``max_length``; longer texts are cut to it. None for an embedder that does not read
        through a ``PromptTokenizer``. The application compares a collection's chunks with it
        (``app.encoding.cut_count``): the causal checkpoints serve 96 tokens, a default chunk is
        200, and only a log line said that most of each chunk never reached its vector.
        ``instruction``: read as documents under it (as a clustering reads its texts), where the
        prompt leaves a text fewer tokens."""
        tokenize = getattr(self, "_tokenize", None)
        if not isinstance(tokenize, PromptTokenizer):
            return None
        return tokenize.text_budget(*self._document_reading_under(instruction))

    def documents_cut(self, texts: Sequence[str], instruction: str | None = None) -> int | None:
        """How many of ``texts`` ``encode`` cuts to ``document_budget`` read as documents (under
        ``instruction`` where given), found by its own tokenisation of the prompts, without the
        model (None where ``document_budget`` is None)."""
        return self.texts_cut(texts, Role.DOCUMENT, instruction)

    def texts_cut(self, texts: Sequence[str], role: Role | str = Role.DOCUMENT,
                  instruction: str | None = None) -> int | None:
        """How many of ``texts`` ``encode`` cuts, read in ``role`` under ``instruction`` (a
        document as ``documents_cut`` reads it; a query under the instruction rendered as
        ``encode`` renders it), found by its own tokenisation of the prompts, without the model;
        None for an embedder that does not read through a ``PromptTokenizer``. A blend, read
        under two prompts, is counted under the longer, which cuts every text the other does."""
        tokenize = getattr(self, "_tokenize", None)
        if not isinstance(tokenize, PromptTokenizer):
            return None
        items = [unicodedata.normalize("NFC", t) for t in validate_texts(texts)]
        if not items:
            return 0
        document = Role.parse(role) is Role.DOCUMENT

        def nfc(text: str | None) -> str | None:
            return None if text is None else unicodedata.normalize("NFC", text)

        readings = [self._document_reading_under(instruction) if document else
                    (Role.QUERY, nfc(self.rendered_instruction(instruction)))]
        weight = getattr(getattr(self, "config", None), "instruction_weight", None)
        if isinstance(self, BlendsInstruction) and isinstance(weight, int | float) and \
                validate_instruction(instruction) is not None and not self.reads_bare(instruction):
            # A blend reads the bare text too (InBedder under its default instruction, which
            # may be the longer prompt: a shorter one given was said to cut nothing where the
            # encoder cut every text: the verification round of the fourth session of
            # 2026-12-07); at weight 0 only that, at 1 only the instructed one.
            bare = (self._document_reading() if document
                    else (Role.QUERY, nfc(self.rendered_instruction(None))))
            readings = [bare] if weight <= 0 else readings if weight >= 1 else [*readings, bare]
        # Only texts that might be longer than the smallest budget are tokenised (a request of
        # short texts: none; ``/v1/embeddings`` counts on every call).
        budget = min(tokenize.text_budget(*reading) for reading in readings)
        long = may_be_cut(items, budget)
        if not long:
            return 0
        # The texts one prompt cuts are among those a longer one cuts: the most is the union.
        return max(tokenize._tokens(long, *reading).truncated for reading in readings)

    def _document_reading_under(self, instruction: str | None) -> tuple[Role, str | None]:
        """``_document_reading``, under ``instruction`` where given (rendered as ``encode``
        renders it: ``rendered_instruction``); a blend's instructed reading, the longer prompt,
        cuts every text its bare one cuts."""
        role, default = self._document_reading()
        if instruction is None:
            return role, default
        rendered = self.rendered_instruction(instruction)
        return role, None if rendered is None else unicodedata.normalize("NFC", rendered)

    def rendered_instruction(self, instruction: str | None) -> str | None:
        """The instruction ``encode`` reads a text under when given ``instruction``: it, stripped
        (None for none or a blank one), or the default an embedder renders in its place."""
        return validate_instruction(instruction)

    def _document_reading(self) -> tuple[Role, str | None]:
        """The role and instruction ``_embed_batch`` reads a document under (no instruction
        given); an embedder that renders a default instruction, or reads every text as a
        query, says so here."""
        return Role.DOCUMENT, None

    def _warn_truncated(self, count: int, total: int, budget: int) -> None:
        """Say that ``count`` of ``total`` texts were cut to ``budget`` tokens: once per
        ``encode`` call or training log window (summed over its batches), or at once outside
        one; off the main thread at most once per ``TRUNCATION_LOG_EVERY_S`` for this embedder,
        with what was cut in between counted (``_note_truncated``). Called right after
        ``PromptTokenizer`` read the batch: what the instruction took from the cut texts, which
        it noted, is said too."""
        cut = _take_instruction_cut()
        # Its advice names max_length only where the embedder takes that option (``cut_advice``).
        raisable = offers_max_length(self)
        tally = getattr(_TALLY, "counts", None)
        if tally is not None:
            seen = tally.setdefault((self.name, budget, raisable), [0, 0])
            seen[0] += count
            seen[1] += total
            if cut is not None:
                _TALLY.cuts.setdefault((self.name, budget, raisable), InstructionCut()).add(cut)
        else:
            _note_truncated(self.name, count, total, budget, cut, raisable)

    # -- persistence -----------------------------------------------------------------

    def _config_dict(self) -> dict[str, Any]:
        """JSON-safe constructor arguments; saved in facet_config.json."""
        return {"name": self.name, "prompts": asdict(self.prompts), "max_length": self.max_length}

    def save(self, path: str | Path) -> Path:
        """Write the embedder to ``path`` (config JSON + any weights)."""
        target = Path(path)
        target.mkdir(parents=True, exist_ok=True)
        config = {"method": self.method, "format_version": FORMAT_VERSION, **self._config_dict()}
        (target / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True))
        self._save_weights(target)
        return target

    def _save_weights(self, target: Path) -> None:
        """Methods with trained parameters write them here."""


@dataclass
class PromptTokens:
    """Token ids of prompts for one batch, before padding.

    Attributes:
        sequences: one id list per text: start + prefix + text + suffix + end.
        text_spans: (start, end) of the text's tokens within each sequence.
        truncated: how many texts were cut to fit ``max_length``.
        instruction_cut: what the instruction took from the texts that were cut; None when
            none was cut or there was no instruction.
    """

    sequences: list[list[int]]
    text_spans: list[tuple[int, int]]
    truncated: int
    instruction_cut: InstructionCut | None = None


class PromptTokenizer:
    """Tokenises ``prefix + text + suffix`` so that only the text is ever truncated.

    The prompt's fixed parts (for example PromptEOL's ``means in one word:"``) survive
    truncation, which a plain ``tokenizer(prompt, truncation=True)`` would cut off.
    """

    def __init__(self, tokenizer: Any, prompts: PromptConfig, max_length: int,
                 start_ids: Sequence[int] = (), end_ids: Sequence[int] = (),
                 empty_ids: Sequence[int] = (), text_reading: Callable[[str], str] | None = None) -> None:
        if max_length < 8:
            raise ValueError(f"max_length must be at least 8 tokens, got {max_length}")
        self.tokenizer = tokenizer
        self.prompts = prompts
        self.max_length = max_length
        self.start_ids = list(start_ids)
        self.end_ids = list(end_ids)
        # Stand-in for a prompt with no tokens at all (an empty text with no template),
        # so every row has one real token to pool and no row embeds as a zero vector.
        self.empty_ids = list(empty_ids)
        # How a text is read before it enters the template (InstEmb's and InBedder's
        # ``text_quotes=drop``), asked at each call so an option set after loading holds.
        self.text_reading = text_reading
        self._fixed: dict[str, list[int]] = {}
        self._fixed_chars = 0  # the cached parts' characters
        self._char_bound: int | None = None

    @property
    def chars_per_token(self) -> int:
        """The most characters of a text one token reads: ``CHARS_PER_TOKEN_BOUND``, or the
        vocabulary's longest token where that is longer (SmolLM2's runs of '#', '-', '=' and of
        spaces after a line break are 64-81 characters: a text of such runs that fitted was
        cut at 32 characters a token and said truncated)."""
        if self._char_bound is None:
            try:
                longest = max((len(token) for token in self.tokenizer.get_vocab()), default=0)
            except (AttributeError, TypeError, NotImplementedError):
                longest = 0
            self._char_bound = max(CHARS_PER_TOKEN_BOUND, longest)
        return self._char_bound

    # Prompt parts are cached; training with one instruction per example (SQuAD questions)
    # would grow the cache without end, so it is emptied past this many entries, or this many
    # characters of them: a server searching under a new 190 KB instruction each time (one long
    # word is one token: accepted) grew 350 KB a request up to 4,096 of them, 0.8 GB (the leak
    # review of the seventh session of 2026-12-06).
    _FIXED_CACHE_SIZE = 4096
    _FIXED_CACHE_CHARS = 1 << 20

    def _fixed_ids(self, text: str) -> list[int]:
        ids = self._fixed.get(text)
        if ids is None:
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []
            if len(text) <= self._FIXED_CACHE_CHARS:
                if len(self._fixed) >= self._FIXED_CACHE_SIZE or \
                        self._fixed_chars + len(text) > self._FIXED_CACHE_CHARS:
                    self._fixed.clear()
                    self._fixed_chars = 0
                self._fixed[text] = ids
                self._fixed_chars += len(text)
        return ids

    def each(self, texts: Sequence[str], role: Role, instructions: Sequence[str | None]) -> PromptTokens:
        """Like calling the tokenizer, but text i is read under ``instructions[i]`` (training
        batches mix instructions); texts sharing an instruction are tokenised together."""
        if len(instructions) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(instructions)} instructions")
        groups: dict[str | None, list[int]] = {}
        for i, instruction in enumerate(instructions):
            groups.setdefault(instruction, []).append(i)
        sequences: list[list[int]] = [[] for _ in texts]
        spans: list[tuple[int, int]] = [(0, 0) for _ in texts]
        truncated = 0
        cut = InstructionCut()
        for instruction, rows in groups.items():
            # Not checked against ``instruction_limit``: a training batch with one long question
            # among thousands keeps training (its text is cut, and the log says by how much);
            # the application checks an instruction (``BaseEmbedder.check_instruction``) first.
            part = self._tokens([texts[i] for i in rows], role, instruction)
            truncated += part.truncated
            if part.instruction_cut is not None:
                cut.add(part.instruction_cut)
            for i, seq, span in zip(rows, part.sequences, part.text_spans, strict=True):
                sequences[i], spans[i] = seq, span
        tokens = PromptTokens(sequences, spans, truncated, cut if cut.tokens else None)
        _note_instruction_cut(tokens.instruction_cut)
        return tokens

    def prompt_length(self, role: Role, instruction: str | None) -> int:
        """Tokens of the prompt for ``role`` under ``instruction``: all that ``max_length``
        holds but the text (start and end tokens included)."""
        prefix, suffix = self.prompts.split(role, instruction)
        return len(self.start_ids) + len(self._fixed_ids(prefix)) + len(self._fixed_ids(suffix)) + len(self.end_ids)

    def _bare_length(self, role: Role) -> int:
        """Tokens of the prompt for ``role`` without the text and without an instruction."""
        return self.prompt_length(role, None)

    def instruction_tokens(self, role: Role, instruction: str | None) -> int:
        """Tokens ``instruction`` adds to the prompt for ``role`` (its rendering included)."""
        return self.prompt_length(role, instruction) - self._bare_length(role)

    def least_max_length(self, role: Role, instruction: str | None) -> int:
        """The smallest ``max_length`` under which ``instruction`` keeps to ``instruction_limit``
        (the prompt, then the instruction and at least as many tokens for the text)."""
        return self._bare_length(role) + 2 * self.instruction_tokens(role, instruction)

    def instruction_limit(self, role: Role) -> int:
        """The most tokens an instruction may take for ``role``: half of what the prompt
        template leaves of ``max_length``, so the text always keeps at least as many tokens as
        the instruction. Past that, the text, not the instruction, is what gets cut: with
        InstEmb (92 tokens, 82 after its template) an 80-word instruction left a query one or
        two tokens and every query returned the same list, and from about 60 words queries were
        cut word by word, all with only a log line that blamed the text. Half is what one
        rule can give every embedder: it keeps a short query whole under the longest
        instruction the evaluation suites, training data and examples use (30 tokens for the
        packaged decoders, against 41 for InstEmb and 43 for the others at 96 tokens; 28
        against 127 for minilm), and leaves a long text (a document, a rerank candidate, a
        text to cluster) at least half of its room, where a fixed minimum for the text would
        either refuse instructions the short budgets can afford or let the long ones crowd out
        documents."""
        return max(self.max_length - self._bare_length(role), 0) // 2

    def check_instruction(self, role: Role, instruction: str | None) -> None:
        """``InvalidInputError`` when ``instruction`` takes more than ``instruction_limit``.

        The message names the instruction as the cause, what it takes, what the embedder reads
        and the limit, in tokens and in characters of text like the instruction (estimated at
        its own characters per token, so it matches what is accepted: the fixed three
        characters a token once said "about 255 characters" where 525 passed). It is said for
        every edge: the UI and the API have no max_length to raise, and only some embedders
        take a [max_length=N] option, so it names neither."""
        cost = self.instruction_tokens(role, instruction) if instruction else 0
        limit = self.instruction_limit(role)
        if cost <= limit:
            return
        assert instruction  # cost > 0
        room = max(self.max_length - self._bare_length(role), 0)
        if limit:
            # Characters per token of this instruction, rounded down to tens: "about".
            chars = max(limit * len(instruction) // cost // 10 * 10, 10)
            advice = (f"an instruction may take at most {limit} tokens, half of what the prompt leaves, "
                      f"so that the text keeps at least as many (about {chars} characters of text like "
                      f"this instruction); shorten the instruction")
        else:
            advice = "this embedder's prompt leaves no room for an instruction; shorten the instruction to nothing"
        left = room - cost
        text_left = f"{left} tokens" if left > 1 else "1 token" if left == 1 else "no room"
        raise InvalidInputError(
            f"the instruction is too long for this embedder: it takes {cost} of the {self.max_length} "
            f"tokens the embedder reads ({self.max_length - room} more are its prompt), leaving the text "
            f"{text_left}; {advice}"
        )

    def __call__(self, texts: Sequence[str], role: Role, instruction: str | None) -> PromptTokens:
        """Token ids of ``texts`` read under ``instruction``.

        Raises:
            InvalidInputError: the instruction leaves the text no room (``check_instruction``
                applies the stricter limit; the application calls it first).
        """
        tokens = self._tokens(texts, role, instruction)
        _note_instruction_cut(tokens.instruction_cut)
        return tokens

    def text_budget(self, role: Role, instruction: str | None) -> int:
        """Tokens left to a text read under ``instruction``: ``max_length`` less the prompt
        (0 where the prompt alone fills it)."""
        return max(self.max_length - self.prompt_length(role, instruction), 0)

    def _tokens(self, texts: Sequence[str], role: Role, instruction: str | None) -> PromptTokens:
        if self.text_reading is not None:
            texts = [self.text_reading(t) for t in texts]
        prefix, suffix = self.prompts.split(role, instruction)
        head = self.start_ids + self._fixed_ids(prefix)
        tail = self._fixed_ids(suffix) + self.end_ids
        budget = self.max_length - len(head) - len(tail)
        if budget < 1:
            # No room at all: said as the limit says it (an instruction over it, as this one is);
            # else a template that alone fills max_length.
            self.check_instruction(role, instruction)
            raise InvalidInputError(
                f"the instruction is too long for this embedder: with its prompt it takes "
                f"{len(head) + len(tail)} of the {self.max_length} tokens the embedder reads, "
                f"leaving no room for the text; shorten the instruction to at most "
                f"{self.instruction_limit(role)} tokens"
            )
        # What the instruction takes from this budget (0 without one): the log of a cut says it.
        taken = self.instruction_tokens(role, instruction) if instruction else 0
        # A text longer than ``chars_per_token`` characters per token of budget is read from
        # its start only as far as the budget's tokens go (``_start_ids``): tokenising a 50 MB
        # string whole took seconds.
        char_cap = budget * self.chars_per_token
        started: dict[int, list[int]] = {}  # a long text's first tokens, where it is cut
        whole_ones: list[str] = []
        for i, t in enumerate(texts):
            if len(t) > char_cap:
                ids, read_all = self._start_ids(t, budget + taken)
                if not read_all or len(ids) > budget:
                    started[i] = ids
                    continue
            whole_ones.append(prefix + t + suffix)
        sequences: list[list[int]] = []
        spans: list[tuple[int, int]] = []
        truncated = fit_without = 0
        # Tokenise the whole prompt at once so merges across the text's edges (for example
        # '."' in PromptEOL) match how the model saw such prompts; only texts that do not
        # fit fall back to tokenising the text alone and cutting it.
        joint = iter(self.tokenizer(whole_ones, add_special_tokens=False,
                                    return_offsets_mapping=True).encodings if whole_ones else [])
        extra = len(self.start_ids) + len(self.end_ids)
        unread = _unread_watch(self.tokenizer)
        unk, special = (self.tokenizer.unk_token_id, set(self.tokenizer.all_special_ids)) if unread is not None \
            else (None, set())
        for i, text in enumerate(texts):
            if i not in started:
                enc = next(joint)
                if not enc.ids and not extra and self.empty_ids:
                    sequences.append(list(self.empty_ids))
                    spans.append((0, 0))
                    continue
                if len(enc.ids) + extra <= self.max_length:
                    lo, hi = len(prefix), len(prefix) + len(text)
                    inside = [i for i, (a, b) in enumerate(enc.offsets) if b > lo and a < hi]
                    first = inside[0] if inside else len(self._fixed_ids(prefix))
                    last = inside[-1] + 1 if inside else first
                    offset = len(self.start_ids)
                    sequences.append(self.start_ids + list(enc.ids) + self.end_ids)
                    spans.append((offset + first, offset + last))
                    if unread is not None and mostly_unknown(enc.ids[first:last], unk, special):
                        unread.add(text)
                    continue
            truncated += 1
            # Read as far as the text could go without the instruction, to tell whether it would fit.
            ids = started[i] if i in started else self._start_ids(text, budget + taken)[0]
            fit_without += int(taken > 0 and len(ids) <= budget + taken)
            ids = ids[:budget]
            sequences.append(head + ids + tail)
            spans.append((len(head), len(head) + len(ids)))
            if unread is not None and mostly_unknown(ids, unk, special):
                unread.add(text)
        cut = InstructionCut(taken, budget, fit_without) if truncated and taken > 0 else None
        return PromptTokens(sequences, spans, truncated, cut)

    def text_tokens(self, text: str, cap: int) -> int:
        """How many of ``text``'s own tokens are read, up to ``cap``, read as ``__call__`` reads
        a long text (``_start_ids``): a word past a WordPiece tokenizer's 100 characters is one
        [UNK], and the text after it counts."""
        return min(len(self._start_ids(text, cap)[0]), cap)

    def _start_ids(self, text: str, want: int) -> tuple[list[int], bool]:
        """The token ids of the start of ``text``, more than ``want`` of them where it has
        that many, and whether they are all of it. Read from ``want`` x ``chars_per_token``
        characters, twice as many each time that gave ``want`` or fewer tokens: a word past
        a WordPiece tokenizer's 100 characters is one [UNK] (a 9,000-character hash is one
        token), and the text after such a word in a chunk was cut off unread, the chunk said
        "longer than minilm reads whole" at ten tokens."""
        n = max(want, 1) * self.chars_per_token
        # At most this far (a 10 MB text of one "word", a hex dump, took 32 s, read whole).
        cap = n * START_READ_FACTOR
        while True:
            whole = n >= len(text)
            # Ended at a word's end: the part of a long word inside the slice (100 characters
            # or fewer) read as many word pieces, not the word's one [UNK], and a text that fits
            # was cut there.
            ids = list(self.tokenizer(text if whole else _to_word_end(text, n),
                                      add_special_tokens=False)["input_ids"])
            if len(ids) > want or whole or n >= cap:
                return ids, whole
            n *= 2


# How many times its first slice ``PromptTokenizer._start_ids`` reads of a text at most.
START_READ_FACTOR = 64
_SPACES = " \t\n\r\x0b\x0c\u3000\xa0"


# A WordPiece tokenizer reads a word longer than this as one [UNK] (BERT's
# ``max_input_chars_per_word``): a part of such a word reads the same.
_WORDPIECE_WORD_LIMIT = 100


def _word_boundary(char: str) -> bool:
    """Whether a word ends at ``char`` as BERT's basic tokenizer splits words: a space, a
    punctuation mark or ASCII symbol, or a CJK character (each its own word)."""
    if char in _SPACES or char.isspace():
        return True
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    if unicodedata.category(char).startswith("P"):
        return True
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2A6DF
            or 0x2A700 <= code <= 0x2CEAF or 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F)


def _to_word_end(text: str, n: int) -> str:
    """``text[:n]`` less the part of the word it ends inside, where that part is no longer
    than a WordPiece word (read alone it would be word pieces, not the whole word's [UNK], and
    a text that fits was cut there). Else ``text[:n]``: that word is over the limit, one [UNK]
    either way (a slice ending far into a run without spaces, CJK prose or a hex dump, was cut
    back to the run's start: a title then a million CJK characters read as its title alone).
    Words end where BERT's tokenizer ends them (``_word_boundary``), not only at spaces: the
    tail of a run after a CJK character or a comma is a word of its own."""
    if n >= len(text) or _word_boundary(text[n]) or _word_boundary(text[n - 1]):
        return text[:n]
    # The nearest boundary within a WordPiece word's length before the cut.
    for i in range(n - 2, max(n - _WORDPIECE_WORD_LIMIT - 2, -1), -1):
        if _word_boundary(text[i]):
            return text[:i + 1]
    return text[:n]


def mostly_unknown(ids: Sequence[int], unk: int | None, special: set[int]) -> bool:
    """More than half of the ordinary tokens of ``ids`` (the special ones other than ``unk``
    left out) are ``unk``."""
    unknown = sum(1 for i in ids if i == unk)
    plain = sum(1 for i in ids if i == unk or i not in special)
    return plain > 0 and 2 * unknown > plain
