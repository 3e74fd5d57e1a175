"""The lease holder's process identity on its host: the boot and the process's start, in the
kernel's ticks since that boot (``app.services.leases.process_identity``).

A lease is timed by the wall clock, and a clock stepped forward past its length (NTP after a
laptop's sleep, a VM resumed from a snapshot) made every live lease look expired: a second
writer on the same host took a running job's collection over, and the job was shown
``interrupted``. With this, a lease whose holder is this host's live process, known by an
identity no clock step moves (and no recycled pid shares), is held whatever the clock says.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.add_column(sa.Column("writer_process", sa.String(80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.drop_column("writer_process")
