"""Imports every method package under ``embedders.methods``; each registers itself on import
(``register_trainable`` in its ``__init__.py``), so adding a method means adding a package."""

from __future__ import annotations

import importlib
import pkgutil

import embedders.methods as _methods

for _module in pkgutil.iter_modules(_methods.__path__):
    if _module.ispkg:
        importlib.import_module(f"{_methods.__name__}.{_module.name}")
