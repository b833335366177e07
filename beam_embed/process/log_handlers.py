"""Imports a library that configures logging when imported (pymilvus calls
logging.config.dictConfig, which flushes and closes every handler the process already has: the
host's, pytest's, Beam's) without letting it close them. Uses logging's private handler lists,
here alone."""

from __future__ import annotations

import importlib
import logging
from types import ModuleType


def import_keeping_handlers(name: str) -> ModuleType:
    held = logging._handlerList[:]  # weak references to every handler made so far
    named = dict(logging._handlers)
    logging._handlerList[:] = []  # dictConfig closes what these list
    try:
        return importlib.import_module(name)
    finally:
        logging._handlerList[:0] = held
        for key, handler in named.items():
            logging._handlers.setdefault(key, handler)
