"""Issue 12: the collection's single-writer lease, job hosts/runners, chunk tasks, unique job ids.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.add_column(sa.Column("writer_job_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("writer_host", sa.String(255), nullable=True))
        batch.add_column(sa.Column("writer_pid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(), nullable=True))
    # SQLite reuses the largest rowid + 1 after deletes; AUTOINCREMENT needs the table rebuilt
    # (batch mode copies it). PostgreSQL's sequence never reuses an id anyway.
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table("index_jobs", recreate="always" if sqlite else "auto",
                              table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("host", sa.String(255), nullable=True))
        batch.add_column(sa.Column("runner", sa.String(16), nullable=False,
                                   server_default="inline"))
        batch.add_column(sa.Column("chunks_total", sa.Integer(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("chunks_done", sa.Integer(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("docs_total", sa.Integer(), nullable=False,
                                   server_default="0"))
    # (Copying the rows into the rebuilt table records the largest id in sqlite_sequence.)
    op.create_table(
        "job_chunks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.Integer(), sa.ForeignKey("index_jobs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("docs", sa.JSON(), nullable=False),
        sa.Column("worker", sa.String(255), nullable=True),
        sa.Column("claimed_until", sa.DateTime(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("job_id", "number"),
    )
    op.create_index("ix_job_chunks_job_id", "job_chunks", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_job_chunks_job_id", "job_chunks")
    op.drop_table("job_chunks")
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table("index_jobs", recreate="always" if sqlite else "auto") as batch:
        for column in ("docs_total", "chunks_done", "chunks_total", "runner", "host"):
            batch.drop_column(column)
    with op.batch_alter_table("collections") as batch:
        for column in ("lease_expires_at", "heartbeat_at", "writer_pid", "writer_host",
                       "writer_job_id"):
            batch.drop_column(column)
