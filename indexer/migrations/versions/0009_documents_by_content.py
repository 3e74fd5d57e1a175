"""An index on the documents' content hash within a collection.

A document moved, renamed or copied to another key re-uses the vectors its content already
has (``IndexService._donors``): every batch of new documents looks their content hashes up in
its collection, which without this index read every row of the collection, once per batch.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_documents_collection_hash", "documents", ["collection_id", "content_hash"])


def downgrade() -> None:
    op.drop_index("ix_documents_collection_hash", table_name="documents")
