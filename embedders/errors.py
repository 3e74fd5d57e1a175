"""Errors raised by the embedders package.

Every error says what was wrong and how to fix it; callers at the edges (CLI, UI,
worker) translate them into exit codes, ``gr.Error`` or task failures.
"""

from __future__ import annotations


class EmbedderError(Exception):
    """Base class for all embedder errors."""


class InvalidInputError(EmbedderError, ValueError):
    """The texts, role or instruction given to ``encode`` are not usable."""


class UnknownEmbedderError(EmbedderError, KeyError):
    """No embedder is registered under the requested name and no checkpoint exists at that path."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class DuplicateRegistrationError(EmbedderError, ValueError):
    """A name is registered twice."""


class CheckpointError(EmbedderError, OSError):
    """A saved embedder cannot be read (missing files, wrong method, incompatible config)."""


class DeviceUnavailableError(CheckpointError):
    """The device asked for is not on this machine or in this torch build (``cuda`` without a GPU,
    ``cuda:N`` past the GPUs there are, ``mps`` or ``xpu`` without one): the machine, not the
    request or the checkpoint."""


class PluginError(EmbedderError):
    """A registered embedder does not keep the contract (its factory's signature, the name of
    the model it builds). (Defined here, light to import; ``embedders.registry`` exports it.)"""


class UnusableVectorsError(PluginError):
    """A registered embedder returned vectors of the right shape of which some cannot be used
    (NaN, infinite, all zero): a fault of the model on those texts, which a caller encoding
    many texts (indexing) can tell apart from the others by encoding them apart."""
