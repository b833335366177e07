"""`python -m beam_embed COMMAND ...`: the `beam-embed` command."""

from beam_embed.pipeline.cli import entry

if __name__ == "__main__":
    entry()
