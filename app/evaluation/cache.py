"""On-disk embedding cache, so re-running an evaluation (or a baseline beside it) is cheap.

Each vector is keyed by ``sha256(identity, role, instruction, text)``. Vectors are
grouped in a bucket folder per (embedder identity, role, instruction); an ``encode`` with
misses appends a ``chunk-*.npz`` (keys + float32 vectors) every ``write_every`` new texts,
each written to a temporary name and renamed, so a killed run never leaves a half-written
chunk and a rerun encodes only what the killed one had not reached (a full SciFact corpus
is an hour of CPU: it need not be done in one go).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from app.text import bar_size
from embedders import Embedder, Role

logger = logging.getLogger(__name__)


def text_key(identity: str, role: str, instruction: str | None, text: str) -> str:
    """The cache key of one embedding."""
    payload = json.dumps([identity, role, instruction, text], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _takes_show_progress(embedder: Embedder) -> bool:
    """Whether ``embedder.encode`` accepts ``show_progress``: the protocol's required keywords
    are ``role``, ``instruction`` and ``batch_size``, and a plugin's encode without it made
    ``facet eval`` fail with a TypeError."""
    try:
        parameters = inspect.signature(embedder.encode).parameters.values()
    except (TypeError, ValueError):  # no signature to read: do not risk the keyword
        return False
    return any(p.name == "show_progress" or p.kind is p.VAR_KEYWORD for p in parameters)


def _bucket_name(identity: str, role: str, instruction: str | None) -> tuple[str, str]:
    model = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:20]
    prompt = hashlib.sha256(json.dumps([role, instruction]).encode("utf-8")).hexdigest()[:20]
    return model, prompt


class EmbeddingCache:
    """Vectors on disk under ``root``; ``root=None`` disables caching (always encode)."""

    def __init__(self, root: str | Path | None, write_every: int = 512) -> None:
        if write_every < 1:
            raise ValueError(f"write_every must be >= 1, got {write_every}")
        self.root = Path(root) if root is not None else None
        self.write_every = write_every
        self._loaded: dict[Path, dict[str, np.ndarray]] = {}
        self.hits = 0  # texts found in the cache
        self.misses = 0  # texts encoded (each distinct text of a call once)
        # Texts repeated within a call, encoded once with their first (a cache or not): counted
        # as hits, `--no-cache` said "cache: 5 hits" of STS-B's repeated sentences.
        self.repeats = 0
        self.written = 0  # embeddings this run saved (a stopped run's note says how many)

    def _bucket(self, identity: str, role: str, instruction: str | None) -> Path | None:
        if self.root is None:
            return None
        model, prompt = _bucket_name(identity, role, instruction)
        return self.root / model / prompt

    def _load_bucket(self, bucket: Path) -> dict[str, np.ndarray]:
        if bucket in self._loaded:
            return self._loaded[bucket]
        table: dict[str, np.ndarray] = {}
        for chunk in sorted(bucket.glob("chunk-*.npz")) if bucket.is_dir() else []:
            try:
                with np.load(chunk, allow_pickle=False) as z:
                    keys, vectors = z["keys"], z["vectors"]
                if keys.ndim != 1 or vectors.ndim != 2 or len(keys) != len(vectors):
                    raise ValueError(f"{len(keys)} keys for {len(vectors)} vectors")
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
                # A damaged chunk only costs a re-encode; say so rather than fail the run (a
                # cut or bit-flipped one is a BadZipFile: "Bad CRC-32", a traceback that ended
                # the run, 2026-12-05).
                logger.warning("ignoring unreadable cache chunk %s: %s", chunk, e)
                continue
            for k, v in zip(keys.tolist(), vectors, strict=True):
                table[k] = v
        self._loaded[bucket] = table
        return table

    def _write_chunk(
        self,
        bucket: Path,
        identity: str,
        role: str,
        instruction: str | None,
        keys: list[str],
        vectors: np.ndarray,
    ) -> None:
        bucket.mkdir(parents=True, exist_ok=True)
        meta = bucket / "meta.json"
        if not meta.exists():
            meta.write_text(json.dumps({"identity": identity, "role": role, "instruction": instruction}, indent=1))
        digest = hashlib.sha256("".join(keys).encode()).hexdigest()[:16]
        fd, tmp = tempfile.mkstemp(dir=bucket, suffix=".npz.tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, keys=np.array(keys, dtype="<U64"), vectors=vectors.astype(np.float32))
            os.replace(tmp, bucket / f"chunk-{digest}.npz")
            self.written += len(keys)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def encode(
        self,
        embedder: Embedder,
        texts: Sequence[str],
        *,
        role: Role | str,
        instruction: str | None,
        batch_size: int = 32,
        show_progress: bool = True,
    ) -> np.ndarray:
        """Embeddings of ``texts`` (float32, (n, dim)); only unique, uncached texts are encoded."""
        role_value = Role.parse(role).value
        # Embedders strip instructions and treat "" as none; key the same way.
        instr = instruction.strip() if instruction and instruction.strip() else None
        identity = embedder.identity
        keys = [text_key(identity, role_value, instr, t) for t in texts]
        bucket = self._bucket(identity, role_value, instr)
        table = self._load_bucket(bucket) if bucket is not None else {}
        missing: dict[str, str] = {}
        found = 0
        seen: set[str] = set()
        for k, t in zip(keys, texts, strict=True):
            if k in seen:
                continue  # a repeat within this call, counted as one whether cached or not
            seen.add(k)
            if k in table:
                found += 1
            else:
                missing[k] = t
        self.hits += found
        self.repeats += len(keys) - len(seen)
        self.misses += len(missing)
        if missing:
            # Longest first across the whole call, as the embedder would order one call's
            # batches, so cutting it into parts adds no padding.
            new_keys = sorted(missing, key=lambda k: -len(missing[k]))
            # Without a cache there is nothing to save part-way: one call, the embedder's own bar.
            step = len(new_keys) if bucket is None else self.write_every
            slices = [new_keys[i:i + step] for i in range(0, len(new_keys), step)]
            bar = None
            if show_progress and len(slices) > 1:
                bar = tqdm(total=len(new_keys), desc=f"encode {embedder.name}", unit="text",
                           **bar_size())
            progress: dict[str, Any] = {}
            if _takes_show_progress(embedder):
                progress["show_progress"] = show_progress and bar is None
            # The parts' truncations said once, for the call (each part's encode logged its
            # own "N of M texts ... truncated": 9 lines on SciFact, no total).
            tally = contextlib.ExitStack()
            if len(slices) > 1:
                from embedders.base import truncation_tally

                tally.enter_context(truncation_tally())
            try:
                for part in slices:
                    vectors = embedder.encode(
                        [missing[k] for k in part],
                        role=role_value,
                        instruction=instr,
                        batch_size=batch_size,
                        **progress,
                    )
                    if bucket is not None:
                        try:
                            self._write_chunk(bucket, identity, role_value, instr, part, vectors)
                        except OSError as e:
                            # A full disk (the cache lives in the data folder): the run goes on
                            # uncached, as a damaged chunk only costs a re-encode; it died after
                            # the encoding with a traceback, its figures lost.
                            logger.warning("the embedding cache cannot be written (%s: %s); this "
                                           "run goes on without caching", bucket,
                                           e.strerror or e)
                            bucket = None
                    for k, v in zip(part, vectors, strict=True):
                        table[k] = v
                    if bar is not None:
                        bar.update(len(part))
            finally:
                if bar is not None:
                    bar.close()
                tally.close()
            if bucket is None:
                # Without a cache keep vectors only for this call.
                out = np.stack([table[k] for k in keys]) if keys else np.zeros((0, embedder.dim), np.float32)
                return out.astype(np.float32, copy=False)
        if not keys:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return np.stack([table[k] for k in keys]).astype(np.float32, copy=False)
