"""A terminal that says it is 0 columns wide and 0 rows high (a serial console, some `docker
exec -t` sessions): tqdm drew nothing there, so `facet index` of 50 documents printed only its
summary (the CLI exploration of the third session of 2026-12-07). A real pseudo-terminal of
that size, the bar `facet index` draws on it."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import sys
import termios
from types import SimpleNamespace

import pytest

from app.commands.index import progress_bar
from app.text import bar_size


def _terminal(columns: int, rows: int) -> tuple[int, object]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    return master, os.fdopen(slave, "w", buffering=1, encoding="utf-8")


def _drawn(master: int) -> str:
    out = b""
    while select.select([master], [], [], 0.2)[0]:
        chunk = os.read(master, 65536)
        if not chunk:
            break
        out += chunk
    return out.decode("utf-8", "replace")


@pytest.mark.parametrize(("columns", "rows"), [(0, 0), (120, 0), (0, 40)])
def test_the_index_bar_is_drawn_on_a_terminal_of_no_size(monkeypatch, columns, rows) -> None:
    master, slave = _terminal(columns, rows)
    try:
        monkeypatch.setattr(sys, "stderr", slave)
        bar, update = progress_bar()
        try:
            for done in (1, 2):
                update(SimpleNamespace(docs_total=4, docs_done=done, current=None,
                                       current_fraction=None, stage=None, chunks_written=done))
        finally:
            bar.close()
        drawn = _drawn(master)
    finally:
        slave.close()  # type: ignore[attr-defined]
        os.close(master)
    assert "2/4" in drawn and "chunks=2" in drawn, repr(drawn)


@pytest.mark.parametrize(("columns", "rows", "size"), [
    (100, 30, {"dynamic_ncols": True}),  # known: followed as the window changes
    (0, 30, {"ncols": 80, "nrows": 30}),
    (0, 0, {"ncols": 80, "nrows": 24}),
])
def test_a_size_is_fixed_only_where_the_terminal_gives_none(columns, rows, size) -> None:
    master, slave = _terminal(columns, rows)
    try:
        assert bar_size(slave) == size
    finally:
        slave.close()  # type: ignore[attr-defined]
        os.close(master)
    with open(os.devnull, "w") as log:
        assert bar_size(log) == {"dynamic_ncols": True}  # not a terminal


def test_an_embedders_own_bar_is_drawn_there_too(monkeypatch, minilm) -> None:
    """``encode(show_progress=True)`` (`facet eval`'s encode in one call, scripts) and `facet
    train` draw the embedders' own tqdm bars, which drew nothing there either (the
    verification round of the third session of 2026-12-07)."""
    master, slave = _terminal(0, 0)
    try:
        monkeypatch.setattr(sys, "stderr", slave)
        minilm.encode(["a card declined", "a refund asked"], show_progress=True)
        drawn = _drawn(master)
    finally:
        slave.close()  # type: ignore[attr-defined]
        os.close(master)
    assert "encode minilm" in drawn and "2/2" in drawn, repr(drawn)
