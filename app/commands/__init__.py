"""CLI command groups; each module has ``register(cli)`` adding its commands."""
