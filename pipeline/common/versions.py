"""An installed distribution's version, read from its metadata without importing it (importing
tensorflow_text imports Keras; the CLI's --version should not import the package at all)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def installed_version(distribution: str, missing: str = "unknown") -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return missing
