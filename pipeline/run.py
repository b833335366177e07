"""`python -m beam_embed.pipeline.run`: the embedding job (`beam-embed run`), kept as a thin entry point."""

import sys

if __name__ == "__main__":
    from beam_embed.pipeline.job.warm_start import read_at_entry
    from beam_embed.process import enter
    from beam_embed.process.exits import exit_after

    read = read_at_entry(sys.argv[1:])  # the job's argv, read once
    enter("run", sys.argv[1:], local=read is not None and read.plain)  # before TensorFlow loads
    from beam_embed.pipeline.job.command import main

    exit_after(lambda: main(sys.argv[1:], read=read))
