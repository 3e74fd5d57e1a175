"""Facet application layer: settings, services (index, search, cluster, eval) and the CLI."""
