"""The --store targets the job writes itself, as steps of its pipeline (BigQuery: Beam's
WriteToBigQuery, where a Dataflow job's workers are), beside the stores loaded once the run
publishes (command.py's check_stores/load_stores): their launch checks, their steps, and what
the dry run says of them."""

from __future__ import annotations

from beam_embed.pipeline.common.stores import in_job, parse_store_uri


def targets(settings, which: int = 0) -> list:
    """The run's --store targets: the job's own (which=0), or those loaded after it (1)."""
    return in_job([parse_store_uri(u, settings.store_table) for u in settings.store])[which]


def check_launch(settings, options) -> None:
    """What a BigQuery write needs before anything runs: its client, and a Cloud Storage
    --temp_location, where its load files are staged (a ValueError naming what is missing)."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    from beam_embed.pipeline.common.stores import check_client

    found = targets(settings)
    if not found:
        return
    for target in found:
        check_client(target)  # Beam's [gcp] extra: its BigQuery client
    temp = options.view_as(GoogleCloudOptions).temp_location or ""
    if not temp.startswith("gs://") or len(temp.rstrip("/")) <= len("gs://"):
        raise ValueError(f"--store {found[0].shown()} stages its load files in --temp_location, "
                         f"and got {temp or 'none'!r}; expected --temp_location gs://BUCKET/PATH")


def write_steps(batches, run, schema) -> None:
    """Each of the job's own stores written from its batches (`schema`: the run's
    OutputSchema)."""
    from beam_embed.pipeline.common.stores.bigquery_store import write_transform

    for target in targets(run.settings):
        _ = batches | step_name(target) >> write_transform(target, schema)


def step_name(target) -> str:
    return f"WriteBigQuery[{target.host}.{target.table}]"


def described(run, schema) -> list[dict]:
    """The dry run's `stores` section: each store, the step that writes it (or when it is
    loaded), and a BigQuery table's schema."""
    from beam_embed.pipeline.common.stores.bigquery_store import VECTOR, table_schema

    out = []
    for target in targets(run.settings):
        out.append({"uri": target.shown(), "step": step_name(target),
                    "table": f"{target.host}.{target.table}",
                    "pooling": schema.storage()[0][0], "vector_column": VECTOR,
                    "write": "WRITE_TRUNCATE (the table holds this run's rows), CREATE_IF_NEEDED",
                    "schema": table_schema(schema.include_text,
                                           [c for _, c in schema.metadata()])["fields"]})
    for target in targets(run.settings, 1):
        out.append({"uri": target.shown(), "table": target.table,
                    "step": None, "loaded": "after the run publishes (not reached by a dry run)"})
    return out
