"""`python -m beam_embed.pipeline.run`: the embedding job (`beam-embed run`), kept as a thin entry point."""

import sys

from beam_embed.pipeline.common.quiet import configure, verbose_requested

if __name__ == "__main__":
    configure(verbose_requested(sys.argv[1:]))  # before anything imports TensorFlow
    from beam_embed.pipeline.common.exits import exit_after
    from beam_embed.pipeline.job.warm_start import job_process

    read = job_process(sys.argv[1:])  # this process is the job's own
    from beam_embed.pipeline.job.command import main

    exit_after(lambda: main(sys.argv[1:], read=read))
