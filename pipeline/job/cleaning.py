"""Text clean-up and optional sentence splitting, per record, before embedding."""

from __future__ import annotations

import re
from collections.abc import Iterator

from beam_embed.pipeline.common.rows.records import Record

_SPACES = re.compile(r"[\s\u00a0\u2000-\u200b\u202f\u205f\u3000\ufeff]+")


def clean_text(text: str) -> str:
    """Collapses every run of (Unicode) whitespace, NBSP included, to one space; trims."""
    return _SPACES.sub(" ", text).strip()


class SentenceSplitter:
    """pysbd's rule-based splitter; one per worker (building it is not free)."""

    def __init__(self, language: str = "en"):
        import pysbd

        self._seg = pysbd.Segmenter(language=language, clean=False)

    def __call__(self, record: Record) -> Iterator[Record]:
        sentences = [s.strip() for s in self._seg.segment(record.text)]
        for i, sentence in enumerate(s for s in sentences if s):
            yield Record(id=f"{record.id}#s{i}", text=sentence, source=record.source,
                         meta=record.meta)
