"""A Dask run's progress line on the launcher: each worker posts the records it embedded as a
Dask event (`tell`, on the worker's side; outside a Dask worker it does nothing), and the
launcher (`Watch`) adds them up into the line a local run prints: records embedded, rate, share
of the input, ETA. The workers' own lines go to their own logs, which the user running the
launcher does not see. Imports dask inside functions only.
"""

from __future__ import annotations

import sys
import time

TOPIC = "beam-embed-progress"


def tell(records: int) -> None:
    """On a Dask worker: `records` more embedded, posted to the launcher."""
    distributed = sys.modules.get("distributed")
    if distributed is None or records <= 0:
        return
    try:
        worker = distributed.get_worker()
    except ValueError:  # not in a Dask worker's task
        return
    worker.log_event(TOPIC, {"records": int(records)})


def line(done: int, elapsed: float, expected: float) -> str:
    """The progress line of `done` records `elapsed` s in, of `expected` (0: unknown)."""
    elapsed = max(elapsed, 1e-9)
    text = f"{done} records embedded, {done / elapsed:.0f}/s"
    if expected > 0:
        fraction = min(done / expected, 1.0)
        eta = elapsed * (1 - fraction) / max(fraction, 1e-9)
        text += f", ~{100 * fraction:.0f}% of input, ETA ~{eta:.0f}s"
    return text


class Watch:
    """`with Watch(client, expected, every_s, say):` calls `say("cluster: " + line(...))` at
    most every `every_s` s (0: never) while workers post their counts."""

    def __init__(self, client, expected: float, every_s: float, say):
        self._client, self._expected, self._every, self._say = client, expected, every_s, say
        self._done = 0
        self._start = self._last = time.monotonic()

    def _heard(self, event) -> None:
        _, message = event
        self._done += int(message.get("records", 0)) if isinstance(message, dict) else 0
        now = time.monotonic()
        if self._every > 0 and now - self._last >= self._every:
            self._last = now
            self._say(f"cluster: {line(self._done, now - self._start, self._expected)}")

    def __enter__(self) -> Watch:
        if self._every > 0:
            self._client.subscribe_topic(TOPIC, self._heard)
        return self

    def __exit__(self, *exc) -> None:
        if self._every > 0:
            try:
                self._client.unsubscribe_topic(TOPIC)
            except Exception:  # noqa: BLE001 - the scheduler gone: nothing to unsubscribe
                pass
