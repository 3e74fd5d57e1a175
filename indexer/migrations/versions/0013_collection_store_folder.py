"""The data folder an embedded-store collection's vectors were written in (resolved path).

With FACET_DATABASE_URL shared and FACET_DATA_DIR pointing at another folder, a collection
whose store folder was missing there was "store files missing ... `facet delete NAME` removes
it", and that delete dropped the metadata of vectors whole in their own folder. A guess (the
folder holds none of the database's collections) stopped it only until one collection was
indexed there. The collection now records where its vectors went, and a listing, a delete or
an index run elsewhere names that folder.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.add_column(sa.Column("store_folder", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.drop_column("store_folder")
