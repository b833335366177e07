"""`python -m beam_embed.pipeline.run`: the embedding job (`beam-embed run`), kept as a thin entry point."""

import sys

if __name__ == "__main__":
    from beam_embed.pipeline.job.early import read_at_entry
    from beam_embed.process import enter
    from beam_embed.process.exits import exit_after

    argv = sys.argv[1:]
    enter("run", argv, local=read_at_entry(argv))  # before anything imports TensorFlow
    from beam_embed.pipeline.job.command import main

    exit_after(main)
