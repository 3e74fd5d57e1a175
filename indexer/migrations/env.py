"""Alembic environment: runs on the connection ``indexer.migrate`` hands over.

Facet never runs ``alembic`` with an ini file of its own: ``indexer.migrate.upgrade(engine)``
builds the configuration in code and passes an open connection in
``config.attributes["connection"]``. ``alembic -c indexer/migrations/alembic.ini ...`` works
too, for writing a new revision (``FACET_DATABASE_URL`` or the ini's URL).
"""

from __future__ import annotations

import os
from typing import Any

from alembic import context
from sqlalchemy import create_engine

from indexer.metadata import Base

config = context.config
target_metadata = Base.metadata


def _applied(ctx: Any, step: Any, heads: Any, run_args: Any) -> None:
    """Note each revision applied in ``config.attributes["applied"]`` (``indexer.migrate``
    names the one whose migration failed after them)."""
    applied = config.attributes.get("applied")
    if applied is not None and step.is_upgrade:
        applied.append(step.up_revision_id)


def _run(connection: Any) -> None:
    # Given a connection already in a transaction (``indexer.migrate._atomic``: one for the
    # whole upgrade, begun by hand on SQLite, whose driver commits DDL at once otherwise),
    # Alembic begins none of its own: begin_transaction below is then a no-op.
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=True, compare_type=True, on_version_apply=_applied)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:  # the alembic command line
    url = os.environ.get("FACET_DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    engine = create_engine(str(url))
    with engine.begin() as conn:
        _run(conn)
