"""Application services: plain objects holding the logic that the CLI, UI and workers call."""

from __future__ import annotations
