"""Job sources, text columns and job-error keys as TEXT, not VARCHAR.

PostgreSQL enforces a VARCHAR's length, SQLite does not: a job on a folder whose path is over
1,024 characters, a csv text column with a long header (a survey question), or the error of a
record whose id was too long to store crashed the job on PostgreSQL with a traceback (and left
a worker's chunk failing for ever) where SQLite went on.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


@contextmanager
def _index_jobs() -> Iterator[Any]:
    # SQLite rebuilds the table to change a type: keep its AUTOINCREMENT (ids never reused),
    # and its counter: the copy records only the largest id left, so the ids of jobs deleted
    # with their collections were handed out again.
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


def upgrade() -> None:
    with _index_jobs() as batch:
        batch.alter_column("source", type_=sa.Text(), existing_type=sa.String(1024),
                           existing_nullable=False)
        batch.alter_column("text_column", type_=sa.Text(), existing_type=sa.String(128),
                           existing_nullable=True)
    with op.batch_alter_table("job_errors") as batch:
        batch.alter_column("document_key", type_=sa.Text(), existing_type=sa.String(1024),
                           existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("job_errors") as batch:
        batch.alter_column("document_key", type_=sa.String(1024), existing_type=sa.Text(),
                           existing_nullable=False)
    with _index_jobs() as batch:
        batch.alter_column("text_column", type_=sa.String(128), existing_type=sa.Text(),
                           existing_nullable=True)
        batch.alter_column("source", type_=sa.String(1024), existing_type=sa.Text(),
                           existing_nullable=False)
