"""Library output off while the API is used, as the commands have it, unless the user asked for
it: BEAM_EMBED_VERBOSE=1, or TensorFlow's own TF_CPP_MIN_LOG_LEVEL set to 0 or 1 (a level of 2
or 3 asks for quiet too). A logger the user gave a level keeps it, and logging is never
configured here: the project's warnings reach the user through the `beam_embed` logger
(Python's last-resort handler prints them when nothing else is set up).
"""

from __future__ import annotations

import logging
import os

LOGGER = logging.getLogger("beam_embed")


def quiet_unless_asked() -> None:
    """Before TensorFlow loads: its start-up lines are held back when it does
    (beam_embed.models.tf_import.import_tensorflow), library loggers without a level of
    their own are set to errors only, Beam's known harmless lines are dropped."""
    from beam_embed.process import gcs_auth
    from beam_embed.process.library_noise import quiet_libraries
    from beam_embed.process.log import is_verbose

    gcs_auth.install()  # gs:// without credentials: one line, no ~25 s of retries
    if is_verbose() or os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() in ("0", "1"):
        return
    quiet_libraries(False, keep_levels=True)
