"""`beam-embed cache [list]`, `beam-embed cache clear [NAME ...]`: the model cache folder
($BEAM_EMBED_CACHE, default ~/.cache/beam-embed), listed or cleared. A cleared export is made
again on the next run that needs it; only what this tool provably wrote there (its marker,
beam_embed.models.cache_marks) is removed, and what is left is named."""

from __future__ import annotations

import os
import shutil
import sys

from beam_embed.pipeline.common.settings.command_line import CommandParser, FlagError
from beam_embed.pipeline.common.settings.errors import one_line_errors, refused

PROG = "beam-embed cache"
ACTIONS = ("list", "clear")
WHAT = {"export": "export of {source}", "partial": "an export being written by process {pid}",
        "stale": "an unfinished export (process {pid} is gone)",
        "keys": "remembered hashes of checkpoint folders, model files and shards",
        "gs": "copies of gs:// models",
        "hf": "Hugging Face Hub models' downloads",
        None: "not written by beam-embed: left alone"}


def parser() -> CommandParser:
    p = CommandParser(PROG, "List or clear the model cache: checkpoint presets' exports (made "
                            "on first use, shared by every environment with the same "
                            "checkpoint) and local copies of gs:// models.")
    p.add_argument("action", nargs="?", default="list", choices=ACTIONS,
                   help="list (the default) or clear")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="clear: only these entries (as `list` names them); default: all")
    return p


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _kind(entry) -> str | None:
    if entry.kind == "partial" and not _alive(entry.pid):
        return "stale"
    return entry.kind


def _preset_exports() -> dict[str, str]:
    """{export folder name: preset} for the checkpoint presets installed here."""
    from beam_embed.models.export_cache import export_path
    from beam_embed.models.presets import checkpoint_folder, load_presets

    used = {}
    try:
        presets = load_presets()
    except (OSError, ValueError):
        return used
    for preset, body in presets.items():
        try:
            folder = (checkpoint_folder(body["checkpoint"], download=False)
                      if "checkpoint" in body else None)
        except ValueError:  # its package is not installed, its Hub model not downloaded
            continue
        if folder and os.path.isdir(folder):
            used[os.path.basename(export_path(folder, body.get("name", preset), False))] = preset
    return used


def _size(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} kB"


def list_cache(folder: str) -> int:
    from beam_embed.models.export_cache import entries

    found = entries(folder)
    total, count = sum(e.bytes for e in found if e.kind), sum(1 for e in found if e.kind)
    print(f"{folder}: {_size(total)} in {count} {'entry' if count == 1 else 'entries'}"
          + ("" if "BEAM_EMBED_CACHE" in os.environ else " (set BEAM_EMBED_CACHE to move it)"))
    used = _preset_exports()
    width = max((len(e.name) for e in found), default=0)
    for e in found:
        what = WHAT[_kind(e)].format(source=e.source or "a checkpoint", pid=e.pid)
        if e.unproved:
            what = f"{e.unproved}: left alone"
        if e.kind == "export":
            what += (f"; preset {used[e.name]} uses it" if e.name in used else
                     "; no preset installed here uses it")
        print(f"  {_size(e.bytes):>9}  {e.name:<{width}}  {what}")
    if any(e.kind for e in found):
        print(f"clear it with: {PROG} clear   (exports are made again on first use)")
    return 0


def clear_cache(folder: str, names: list[str]) -> int:
    from beam_embed.models.export_cache import entries
    from beam_embed.models.gcs_copy import writable_cache

    found = {e.name: e for e in entries(folder)}
    unknown = [n for n in names if n not in found or not found[n].kind]
    if unknown:
        ours = sorted(n for n, e in found.items() if e.kind)
        why = found[unknown[0]].unproved if unknown[0] in found else None
        print(f"{PROG}: {unknown[0]!r} is not an entry of the cache {folder}"
              f"{f' ({why}: left alone)' if why else ''}; expected one of {ours}",
              file=sys.stderr)
        return 2
    chosen = [found[n] for n in names] if names else list(found.values())
    for e in chosen:  # what looks like an entry but is not provably the tool's is named
        if e.unproved:
            print(f"left {e.name}: {e.unproved}")
    doomed = [e for e in chosen if _kind(e) not in (None, "partial")]
    for e in chosen:
        if _kind(e) == "partial":  # an export some process is writing now
            print(f"left {e.name}: {WHAT['partial'].format(pid=e.pid)}")
    if doomed:
        writable_cache("clearing it")
    freed, removed = 0, 0
    for e in doomed:
        shutil.rmtree(e.path)
        freed, removed = freed + e.bytes, removed + 1
    print(f"removed {removed} {'entry' if removed == 1 else 'entries'} ({_size(freed)}) from "
          f"{folder}")
    return 0


@one_line_errors(PROG)
def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse(sys.argv[1:] if argv is None else list(argv))
        if args.names and args.action != "clear":
            raise FlagError(f"entry names go with `clear`, got `{args.action} "
                            f"{' '.join(args.names)}`")
    except FlagError as e:
        return refused(PROG, e)
    from beam_embed.models.gcs_copy import CacheFolderError, cache_dir

    try:
        folder = cache_dir()
    except CacheFolderError as e:
        return refused(PROG, e)
    return list_cache(folder) if args.action == "list" else clear_cache(folder, args.names)
