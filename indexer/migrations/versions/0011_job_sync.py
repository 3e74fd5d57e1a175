"""Whether an index job removes what is gone from its source (``--sync`` / ``--no-sync``).

A job run with ``--no-sync`` and stopped part-way was resumed, as its hint said, by ``facet
index SOURCE ...`` without the flag: for a folder that syncs, and the documents the user had
kept on purpose (their files deleted at the source) were removed. The job now records its
choice (None: the source's default, a folder syncs and a file does not), and the hint repeats it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("index_jobs") as batch:
        batch.add_column(sa.Column("sync", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("index_jobs") as batch:
        batch.drop_column("sync")
