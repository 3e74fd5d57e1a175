"""A flag on the job row asking a running job to stop (``cancel_requested``).

An index job could not be cancelled: ``cancelled`` was a state no code set. A queued job is
cancelled at once; a running one runs in another thread, process or worker, so the request is
recorded on its row, and its runner reads it at each batch boundary and ends the job
``cancelled`` (``Facet.cancel_job``). Existing rows read false: nothing asked.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa

from indexer.migrations.tables import index_jobs_batch as _index_jobs

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with _index_jobs() as batch:
        batch.add_column(sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with _index_jobs() as batch:
        batch.drop_column("cancel_requested")
