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

import sqlalchemy as sa
from alembic import op

from indexer.migrations.tables import index_jobs_batch as _index_jobs

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


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
