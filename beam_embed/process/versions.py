"""An installed distribution's version, read from its metadata without importing it (importing
tensorflow_text imports Keras; the CLI's --version should not import the package at all), and
the command that adds an extra to beam-embed as it is installed here."""

from __future__ import annotations

import json
import shlex
import sys
from importlib.metadata import PackageNotFoundError, distribution, version
from urllib.parse import unquote, urlparse


def installed_version(distribution: str, missing: str = "unknown") -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return missing


def install_command(extra: str | None = None) -> str:
    """`pip install` of beam-embed (with `extra`) from where this installation came from, with
    this environment's own Python: the checkout or wheel a local install named (`-e` for an
    editable one, as `make` installs it), the repository of a VCS install, else the index."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    name = "beam-embed" + (f"[{extra}]" if extra else "")
    try:
        direct = json.loads(distribution("beam-embed").read_text("direct_url.json") or "{}")
    except (PackageNotFoundError, ValueError):
        direct = {}
    url, extras = direct.get("url", ""), f"[{extra}]" if extra else ""
    if url.startswith("file://"):
        editable = "-e " if direct.get("dir_info", {}).get("editable") else ""
        return f"{pip} {editable}{shlex.quote(unquote(urlparse(url).path) + extras)}"
    if "vcs_info" in direct:
        vcs = direct["vcs_info"].get("vcs", "git")
        return f"{pip} {shlex.quote(f'{name} @ {vcs}+{url}')}"
    return f"{pip} {shlex.quote(name)}"
