"""The csv column / jsonl field an index job reads its texts from, on the job row.

A worker's chunk task re-reads its documents from the source knowing only the job's id, so
a job whose records keep their text in another field (``--text-column``) could not be sent
to the workers; with the field on the job, planning and every chunk parse the source alike.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("index_jobs") as batch:
        batch.add_column(sa.Column("text_column", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("index_jobs") as batch:
        batch.drop_column("text_column")
