"""The HTTP edge (``facet serve``): FastAPI routes over the application core.

Needs the ``api`` extra (fastapi, uvicorn). ``create_app`` builds the app; see docs/api.md.
"""

from __future__ import annotations

from app.api.server import create_app

__all__ = ["create_app"]
