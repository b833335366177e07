"""google-auth's private APIs behind the Compute Engine check (beam_embed.process.gcs_auth):
google-auth has no option for how often, or how long, it asks the metadata server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def gce_check_replaced(check: Callable) -> Iterator[None]:
    """Inside the block, google-auth's "is this a Compute Engine machine?" (its
    `_metadata.is_on_gce(request)`, which google.auth.default asks before it takes the metadata
    server's credentials) is `check(request, own)`, `own` being google-auth's. google-auth has
    no option for how often, or how long, it asks (3 tries of 3 s)."""
    from google.auth.compute_engine import _metadata

    own = _metadata.is_on_gce
    _metadata.is_on_gce = lambda request: check(request, own)
    try:
        yield
    finally:
        _metadata.is_on_gce = own


def gce_by_firmware() -> bool:
    """Whether this machine's firmware says it is a Compute Engine VM (google-auth's Linux
    check, `_metadata.detect_gce_residency_linux`); reads a file, asks no server."""
    from google.auth.compute_engine import _metadata

    return _metadata.detect_gce_residency_linux()


def metadata_server_answers(request, timeout: float) -> bool:
    """Whether the metadata server answers one try within `timeout` seconds (google-auth's
    `_metadata.ping`, whose own default is 3 tries of 3 s)."""
    from google.auth.compute_engine import _metadata

    return _metadata.ping(request, timeout=timeout, retry_count=1)
