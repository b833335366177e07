"""`python -m beam_embed.models.export.fresh_process ARGS_JSON`: one export in a process of its
own (convert.export_checkpoint says why), its outcome written as JSON to ARGS_JSON's `result`:
{"metadata": ...}, or {"error": class name, "message": ...}."""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    result = args.pop("result")
    try:
        from beam_embed.models.tf_import import import_tensorflow

        import_tensorflow()
        from beam_embed.models.export.convert import export_here

        src_dir, out_dir = args.pop("src_dir"), args.pop("out_dir")
        outcome = {"metadata": export_here(src_dir, out_dir, **args)}
    except Exception as e:  # reported to the parent, which raises it again
        outcome = {"error": type(e).__name__, "message": str(e)}
    with open(result, "w", encoding="utf-8") as f:
        json.dump(outcome, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
