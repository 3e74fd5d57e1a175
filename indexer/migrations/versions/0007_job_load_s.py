"""The model's load on the job row (``load_s``), beside its other stages' seconds.

A run over a collection that records its embedder loads the model only once something needs
encoding, and times that load as a stage of its own (``load_model``) in the run's report; the
job row had no place for it, so ``facet jobs ID`` and ``GET /jobs/{id}`` left out what the
run's own summary counted (seconds for MiniLM, minutes for an LLM embedder on a CPU). Existing
rows read 0: no load recorded.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa

from indexer.migrations.tables import index_jobs_batch as _index_jobs

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with _index_jobs() as batch:
        batch.add_column(sa.Column("load_s", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with _index_jobs() as batch:
        batch.drop_column("load_s")
