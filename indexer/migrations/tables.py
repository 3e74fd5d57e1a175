"""Helpers the migrations share (kept out of ``versions/``, which holds one file a revision)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op


@contextmanager
def index_jobs_batch() -> Iterator[Any]:
    """``op.batch_alter_table("index_jobs")`` that keeps what SQLite's table copy would lose.

    SQLite rebuilds the table to change a column: its AUTOINCREMENT is kept (ids never reused),
    and its counter too: the copy records only the largest id left, so the ids of jobs deleted
    with their collections were handed out again (0005, 0006).
    """
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    seq = bind.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'index_jobs'")
                       ).scalar() if sqlite else None
    with op.batch_alter_table("index_jobs", table_kwargs={"sqlite_autoincrement": True}) as batch:
        yield batch
    if seq is not None:
        kept = bind.execute(sa.text("UPDATE sqlite_sequence SET seq = max(seq, :seq) "
                                    "WHERE name = 'index_jobs'"), {"seq": seq})
        if not kept.rowcount:  # the table was empty, so the copy recorded nothing
            bind.execute(sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES "
                                 "('index_jobs', :seq)"), {"seq": seq})
