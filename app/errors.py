"""Domain errors of the app services. Each edge translates them: the CLI prints the
message and exits with ``exit_code``, the UI raises ``gr.Error``, workers fail the task.
"""

from __future__ import annotations


class FacetError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class InvalidRequestError(FacetError):
    """The request itself is malformed (empty query, bad filter, unknown option value)."""

    exit_code = 2


class NotFoundError(FacetError):
    """A named thing (collection, job, document, path) does not exist."""

    exit_code = 3


class DataError(FacetError):
    """An input file cannot be read or parsed; the message names the file and line."""

    exit_code = 4
