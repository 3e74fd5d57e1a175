"""What loads the embedder behind each named vector (a checkpoint's path, or a name with options).

A collection indexed from a checkpoint directory recorded only the checkpoint's name, so a search
without ``--embedder`` (and every index chunk a worker ran) loaded the registered model of that
name instead, and refused or failed on the weights' mismatch.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("collection_embedders") as batch:
        batch.add_column(sa.Column("source", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("collection_embedders") as batch:
        batch.drop_column("source")
