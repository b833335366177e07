"""`python -m beam_embed.pipeline.pca`: the PCA job (`beam-embed pca`)."""

import sys

from beam_embed.process import enter
from beam_embed.process.exits import exit_after

enter("pca", sys.argv[1:])  # before anything imports TensorFlow
from beam_embed.pipeline.pca.command import main  # noqa: E402

exit_after(main)
