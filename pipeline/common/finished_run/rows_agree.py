"""Whether a finished run's vectors are this model's, when its recorded fingerprint is not:
a few of its rows embedded again and compared.

Exports made by earlier versions were not deterministic (their preprocessor graph held a memory
address), so an export made again from the same folder has another fingerprint though its
vectors are the same; a run of such an export would be refused by `search` and `--reuse` for
good. The fingerprint stays the check; this is its fallback for a run that recorded another
one: SAMPLE rows of its first shard are embedded again with the model at the handles it names,
with the run's own settings, and compared with the stored vectors. Only float vectors are
compared (int8 and binary codes are too coarse to tell two models apart reliably), and only
when the run kept its texts.
"""

from __future__ import annotations

import numpy as np

SAMPLE = 16  # rows embedded again: a different model (or weights) fails on the first of them
AGREE = {"float32": 0.99999, "float16": 0.9999}  # cosine, stored vectors to new ones


def rows_agree(model, pooling, has_text: bool, shard: str, fmt, kind: str, encoder: str,
               preprocessor: str | None) -> str | None:
    """One line saying why a run (its ModelEntry `model`, its PoolingColumn `pooling`, whether
    it kept its texts, its first shard `shard` of format `fmt`) is accepted although its
    fingerprint differs from the model's at these handles now, or None when it is not."""
    from beam_embed.models.spec import encoder_spec

    if pooling.dtype not in AGREE or not has_text or fmt.read_previous is None:
        return None
    p, m = pooling, model
    rows = []
    for text, vectors, _, _ in fmt.read_previous(shard, ((p.column, p.width),)):
        if text:
            rows.append((text, vectors[0]))
        if len(rows) == SAMPLE:
            break
    if not rows:
        return None
    try:
        spec = encoder_spec(encoder=encoder, preprocessor=preprocessor, kind=kind,
                            max_seq_length=m.max_seq_length, poolings=(p.name,),
                            normalize=p.normalize, long_text=m.long_text or "truncate",
                            name=m.name, truncate_dim=m.truncate_dim, prompt=m.prompt or "",
                            precision=m.precision)
        fresh = spec.build().embed([t for t, _ in rows]).vectors[p.column]
    except (ValueError, OSError, KeyError):
        return None
    stored = np.stack([np.asarray(v, np.float32) for _, v in rows])
    cos = np.sum(stored * fresh, 1) / (np.linalg.norm(stored, axis=1) *
                                        np.linalg.norm(fresh, axis=1) + 1e-12)
    if cos.min() < AGREE[p.dtype]:
        return None
    return (f"its recorded model fingerprint {m.fingerprint} is not the model's now (an export "
            f"made again by an earlier version, whose exports were not deterministic), but "
            f"{len(rows)} of its rows embedded again agree (cosine >= {cos.min():.6f}): "
            "accepted")
