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


def _run(connection: Any) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=True, compare_type=True)
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
