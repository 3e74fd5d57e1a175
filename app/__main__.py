"""``python -m app`` runs the facet CLI."""

from app.cli import main

main()
