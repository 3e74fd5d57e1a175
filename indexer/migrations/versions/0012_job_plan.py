"""What a worker job's planner task carries (``PreparedJob.to_dict()`` as JSON, its id aside).

A planner task lost before any worker planned it (a Redis restarted without persistence or
flushed while the job waited, a worker killed as it took the message off the queue, a task a
worker on another database sent back until it dropped it) left its job `queued` for ever: the
workers' sweeper re-sent lost chunk tasks only, and nothing else held what the planner needs
(its options, the folders it may read). The job now keeps it, and the sweeper sends the task
again.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("index_jobs") as batch:
        batch.add_column(sa.Column("plan", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("index_jobs") as batch:
        batch.drop_column("plan")
