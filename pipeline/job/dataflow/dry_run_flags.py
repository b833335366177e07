"""The dry run's flags on a plain argparse parser or group, so `beam-embed run --help` lists them
without importing Beam; `DryRunOptions` (dry_run_options.py) adds the same ones to Beam's parser."""

from __future__ import annotations


def add_dry_run_flags(parser) -> None:
    g = parser.add_argument_group("beam-embed dry run")
    g.add_argument("--dry-run", dest="describe_only", action="store_true", default=False,
                   help="build the job (for --runner, Dataflow included) and write its "
                        "description to --job-file (or stdout); submits and contacts nothing")
    g.add_argument("--job_file", "--job-file", dest="job_file", default=None,
                   help="where --dry-run writes the job description (JSON, a local path); "
                        "default: stdout")
