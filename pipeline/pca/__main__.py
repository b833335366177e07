"""`python -m beam_embed.pipeline.pca`: the PCA job (`beam-embed pca`)."""

import sys

from beam_embed.pipeline.common.quiet import configure, verbose_requested

configure(verbose_requested(sys.argv[1:]))  # before anything imports TensorFlow
from beam_embed.pipeline.pca.command import main  # noqa: E402

sys.exit(main())
