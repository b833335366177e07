"""The closing lines of a run, from its manifest: the counts, what was written where, why records
were dead-lettered (the commonest reasons, and the file that lists them all), and what to run
next."""

from __future__ import annotations

import collections
import json
import os
import re

from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.manifest.entries import Counts
from beam_embed.pipeline.common.run_folder.manifest.folder import MANIFEST
from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest
from beam_embed.process import exits
from beam_embed.process.log import log

REASONS_READ = 100_000  # dead letters read for the commonest reasons; the file has them all
REASONS_SHOWN = 3
DEFAULT_OUTPUT = "output/embeddings"


def reason_group(reason: str) -> str:
    """A reason without its particulars (numbers, parenthesized details), so alike ones count
    together: "malformed JSON (Expecting value: line 1 column 1 (char 0))" -> "malformed JSON"."""
    while True:
        shorter = re.sub(r"\s*\([^()]*\)", "", reason)
        if shorter == reason:
            break
        reason = shorter
    return re.sub(r"\d+", "N", reason).strip()


def top_reasons(output: str, files: list[str]) -> list[tuple[str, int]]:
    """(reason, count) of the commonest dead-letter reasons (empty texts left out), from the
    first REASONS_READ dead letters."""
    counts, read = collections.Counter(), 0
    for name in files:
        with FileSystems.open(FileSystems.join(output, name)) as f:
            for line in f:
                if read >= REASONS_READ:
                    return counts.most_common(REASONS_SHOWN)
                read += 1
                letter = json.loads(line)
                if letter.get("kind") != "empty":
                    counts[reason_group(letter.get("reason", "?"))] += 1
    return counts.most_common(REASONS_SHOWN)


COLOURS = 9  # values pca's plot gives a colour of their own (more share one grey "other")
SHARDS_READ = 8  # shards whose metadata columns are counted (a large run's first ones)
VIZ_TRIES = 100  # -viz, -viz-2, ...: the first free folder is suggested


def next_commands(output: str, manifest: JobManifest | None = None) -> str:
    """pca and search, as they will run and look right: pca into a folder that does not exist
    yet (never over another run), coloured by a column of a few values (the first metadata
    column of 2..COLOURS values, else the input files when they are that many, else length):
    a column of a value per row (3,000 titles) would colour 9 rows and grey the rest."""
    output = output.rstrip("/")
    if manifest is not None and set(manifest.files) == {"lance"}:  # pca and search read shards
        return (f'next: lancedb.connect("{output}").open_table("embeddings") in Python; '
                "pca and search read Parquet or TFRecord shards (--format parquet,lance)")
    color = _color_flag(output, manifest) if manifest is not None else ""
    return (f"next: beam-embed pca --input {output} --output {_free_folder(output)}{color}   "
            f'or   beam-embed search {output} "your query"')


def _free_folder(output: str) -> str:
    base = "output/viz" if output == DEFAULT_OUTPUT else f"{output}-viz"
    for n in range(1, VIZ_TRIES + 1):
        folder = base if n == 1 else f"{base}-{n}"
        if not _exists(folder):
            return folder
    return base  # pca says what stands in the way


def _exists(path: str) -> bool:
    if "://" not in path:
        return os.path.lexists(path)
    return bool(FileSystems.match([f"{path}/*"], limits=[1])[0].metadata_list)


def _color_flag(output: str, manifest: JobManifest) -> str:
    """` --color-by COLUMN`, or "" where pca's default (source: the input file) fits."""
    columns = list(manifest.metadata_columns)
    counts = _value_counts(output, manifest.files.get("parquet", [])[:SHARDS_READ], columns)
    if counts is None:  # no Parquet shards to count in: length fits any run
        return " --color-by length"
    counts["source"] = manifest.inputs.files or 0  # a row's source is its input file
    fit = [c for c in [*columns, "source"] if 2 <= counts[c] <= COLOURS]
    if not fit:
        return " --color-by length"
    return "" if fit[0] == "source" else f" --color-by {fit[0]}"


def _value_counts(output: str, shards: list[str], columns: list[str]) -> dict | None:
    """Each column's distinct values, counted up to COLOURS + 1 (reading stops there)."""
    if not shards:
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    seen: dict[str, set] = {c: set() for c in columns}
    for name in shards:
        counting = [c for c in columns if len(seen[c]) <= COLOURS]
        if not counting:
            break
        with FileSystems.open(FileSystems.join(output, name)) as f:
            table = pq.read_table(f, columns=counting)
        for c in counting:
            try:
                seen[c].update(table.column(c).unique().to_pylist())
            except (pa.ArrowNotImplementedError, TypeError):  # lists, maps: no colour
                seen[c].update(range(COLOURS + 1))
    return {c: len(v) for c, v in seen.items()}


def duplicates_line(n: int, example: str | None) -> str:
    """Every record was embedded, so the output has rows that share an id."""
    e_g = f", e.g. {example!r}" if example is not None else ""
    return (f"warning: {n} {'id appears' if n == 1 else 'ids appear'} more than once{e_g}; "
            "join on id with care")


def exit_code(counts: Counts, allow_incomplete_input: bool) -> int:
    """What a finished run exits with: incomplete input unless accepted, then nothing embedded."""
    if counts.files_incomplete and not allow_incomplete_input:
        return exits.INCOMPLETE_INPUT
    if not counts.embedded:
        return exits.NOTHING_EMBEDDED
    return exits.OK


def summarize(output: str, allow_incomplete_input: bool = False) -> int:
    manifest = JobManifest.read(output)
    c = manifest.counts
    shards = ", ".join(f"{len(names)} {fmt}" if fmt != "lance" else
                       f"{sum('/data/' in n for n in names)} lance" for fmt, names in
                       manifest.files.items())
    log(f"done: read {c.read}, embedded {c.embedded} ({c.truncated} truncated), skipped "
        f"empty {c.skipped_empty}, dead-lettered {c.dead_lettered}, {c.tokens} tokens in "
        f"{manifest.wall_time_s:.1f}s -> {output} ({shards} shard(s), {MANIFEST})")
    if c.encoded is not None:  # --dedupe, --reuse
        line = (f"encoded {c.encoded} text(s) for {c.embedded} rows "
                f"({c.distinct_texts} distinct texts)")
        if manifest.reused_from is not None:
            line += (f"; copied {c.reused} rows' vectors from "
                     f"{manifest.reused_from.output}")
        log(line)
    errors = manifest.errors_files
    if c.dead_lettered:
        reasons = "; ".join(f"{n} x {r}" for r, n in top_reasons(output, errors))
        where = FileSystems.join(output, errors[0] if len(errors) == 1 else "errors-*.jsonl")
        log(f"dead-lettered {c.dead_lettered}: {reasons} (every one, with its id and an "
            f"excerpt, in {where})")
    if c.duplicate_ids:
        log(duplicates_line(c.duplicate_ids, manifest.duplicate_id_example))
    code = exit_code(c, allow_incomplete_input)
    if c.files_incomplete:
        log(f"{'incomplete' if code == exits.INCOMPLETE_INPUT else 'warning'}: "
            f"{c.files_incomplete} input file(s) were cut short or corrupt; the rest of each "
            "is lost (dead letters of kind 'incomplete')" + (
                "" if allow_incomplete_input else
                f"; exit code {exits.INCOMPLETE_INPUT} (--allow-incomplete-input accepts this)"))
    if c.embedded:
        log(next_commands(output, manifest))
    elif c.dead_lettered:
        log("nothing was embedded: every record was dead-lettered (reasons above)")
    else:
        log("nothing was embedded: the input had no records with text (check --input and "
            "--text_field)")
    return code
