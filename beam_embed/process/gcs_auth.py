"""gs:// credentials: found in one look, or anonymous access said in one line.

Beam looks for Google's Application Default Credentials the first time a process touches a gs://
path (apache_beam.internal.gcp.auth, for its filesystem and for our claim on a gs:// folder):
google.auth.default(), retried 4 times with backoff when there are none (~25 s), each try logged
as a warning with its traceback, and then it connects anonymously, which public buckets allow.
Credentials that are missing do not appear on a retry, so the commands look once: the
environment (GOOGLE_APPLICATION_CREDENTIALS), gcloud's application-default file, then the
metadata server that Google Cloud machines have, asked once with a short timeout unless the
machine's firmware says it is a Compute Engine VM (then google-auth's own check runs). None found:
one line of the tool's own, and anonymous access. STORAGE_EMULATOR_HOST names a local emulator,
which takes no credentials: anonymous at once, nothing looked up. The look runs just before a
process's first gs:// request, so that is where Cloud Storage is first checked to be reachable
at all (gcs_endpoint.py).

`install()` runs at every process entry (beam_embed.process.set_up): it puts this look in place of
Beam's when Beam's auth module loads, so a command that never touches Beam (its --help, a flag
error) imports none of it. Beam keeps its lock and its one answer per process. What this touches
of Beam and google-auth that they keep private goes through beam_embed.process.private_apis
(its beam and google_auth modules).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

from beam_embed.process.gcs_endpoint import EMULATOR_ENV, check_reachable
from beam_embed.process.log import is_verbose, log
from beam_embed.process.private_apis.beam import (
    BEAM_AUTH_MODULE,
    beam_credentials,
    replace_beam_credentials_look,
)
from beam_embed.process.private_apis.google_auth import (
    gce_by_firmware,
    gce_check_replaced,
    metadata_server_answers,
)

CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
ANONYMOUS = ("no Google Cloud credentials found; reading gs:// anonymously (set "
             "GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth application-default login`)")
# The metadata server answers in milliseconds where there is one (Cloud Run, GKE, Cloud
# Shell); elsewhere its address is refused at once, or dropped, and then this is the wait.
METADATA_TIMEOUT_S = 0.5


def service_credentials(pipeline_options):
    """What Beam's own look returns: its adapter around the credentials found, or None for
    anonymous access. First, Cloud Storage is checked to be reachable at all (gcs_endpoint.py):
    the first gs:// request follows, and it would be retried for two minutes."""
    check_reachable()
    if os.environ.get(EMULATOR_ENV):
        return None
    import google.auth
    from apache_beam.options.pipeline_options import GoogleCloudOptions
    from google.auth.exceptions import DefaultCredentialsError

    scopes = pipeline_options.view_as(GoogleCloudOptions).gcp_oauth_scopes
    try:
        with gce_check_replaced(_asked_once), _google_auth_quiet():
            credentials, _ = google.auth.default(scopes=scopes)
    except DefaultCredentialsError as e:
        log(_anonymous_because(e))
        return None
    return beam_credentials(credentials, pipeline_options)


def _anonymous_because(error: Exception) -> str:
    named = os.environ.get(CREDENTIALS_ENV)
    if not named:
        return ANONYMOUS
    cause = (str(error).strip().splitlines() or [type(error).__name__])[0].rstrip(".")
    return (f"the Google Cloud credentials in {CREDENTIALS_ENV} ({named}) cannot be used: "
            f"{cause}; reading gs:// anonymously")


def _asked_once(request, own_check) -> bool:
    """google-auth asks the metadata server up to 3 times, 3 s each, before it concludes the
    machine is not on Google Cloud; here once, for METADATA_TIMEOUT_S, unless the firmware
    says Compute Engine (there its own check runs, retries included)."""
    if os.environ.get("NO_GCE_CHECK") == "true":  # google-auth's own switch
        return False
    if gce_by_firmware():
        return own_check(request)
    return metadata_server_answers(request, METADATA_TIMEOUT_S)


@contextlib.contextmanager
def _google_auth_quiet():
    """google-auth warns of each failed try ("Compute Engine Metadata server unavailable"); the
    one line says what they mean. -v shows them."""
    logger = logging.getLogger("google.auth")
    level = logger.level
    if not is_verbose():
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def patch(module) -> bool:
    """Puts service_credentials in place of Beam's look in its auth `module`; False (Beam's
    own kept) without google-auth or when Beam no longer looks the way this expects."""
    return replace_beam_credentials_look(module, service_credentials)


class _PatchOnLoad:
    """A meta path finder that lets Beam's auth module load as usual, then patches it."""

    def find_spec(self, name, path=None, target=None):
        if name != BEAM_AUTH_MODULE:
            return None
        sys.meta_path.remove(self)  # once; and the real finders find the module
        from importlib.util import find_spec

        spec = find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Beam's credentials look replaced, now if its auth module is loaded, else when it loads."""
    module = sys.modules.get(BEAM_AUTH_MODULE)
    if module is not None:
        patch(module)
    elif not any(isinstance(f, _PatchOnLoad) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnLoad())


def install_now() -> None:
    """Beam's credentials look replaced at once, its auth module imported for it: what the
    Python API does when a call is given a gs:// path (that call's wish for gs://), leaving no
    import hook in the host process."""
    import importlib

    patch(importlib.import_module(BEAM_AUTH_MODULE))
