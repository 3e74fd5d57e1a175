"""When a job was queued, apart from when it started (``started_at``, now nullable).

``started_at`` was set when the job was queued and again when it began running, so a job that
failed before it ran (its model would not load, its source was gone, a later job superseded it)
said "started" at the time it was queued. Existing rows keep their ``started_at`` as their
``queued_at`` too; a job still queued has not started, whatever the old column said.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from indexer.migrations.tables import index_jobs_batch as _index_jobs

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Added nullable, filled, then required: a NOT NULL column cannot be added to rows that
    # have no value for it (PostgreSQL refuses; SQLite's copy would too).
    with _index_jobs() as batch:
        batch.add_column(sa.Column("queued_at", sa.DateTime(), nullable=True))
        batch.alter_column("started_at", existing_type=sa.DateTime(), nullable=True)
    op.execute("UPDATE index_jobs SET queued_at = started_at")
    op.execute("UPDATE index_jobs SET started_at = NULL WHERE state = 'queued'")
    with _index_jobs() as batch:
        batch.alter_column("queued_at", existing_type=sa.DateTime(), nullable=False)


def downgrade() -> None:
    # The old schema requires a start: a job that never started gets its queue time, as the
    # old code recorded it.
    op.execute("UPDATE index_jobs SET started_at = queued_at WHERE started_at IS NULL")
    with _index_jobs() as batch:
        batch.alter_column("started_at", existing_type=sa.DateTime(), nullable=False)
        batch.drop_column("queued_at")
