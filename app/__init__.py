"""Facet application layer: settings, services (index, search, cluster, eval) and the CLI."""

from __future__ import annotations

DISTRIBUTION = "facet-search"


def _version() -> str:
    """The installed distribution's version; in a checkout run without installing it,
    pyproject.toml's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def __getattr__(name: str) -> str:
    # ``__version__`` on first use: every process imports ``app``, few ask its version.
    if name == "__version__":
        value = _version()
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
