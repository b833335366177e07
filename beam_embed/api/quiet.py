"""The API's own logger, and Beam's lines around the API's own calls.

The project's warnings reach the user through the `beam_embed` logger (Python's last-resort
handler prints them when nothing else is set up); logging is never configured here, and no
logger, filter or environment variable of the host process is changed for good.
"""

from __future__ import annotations

import logging

LOGGER = logging.getLogger("beam_embed")
