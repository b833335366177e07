"""`python -m pipeline.pca`: the PCA job (`beam-embed pca`)."""

import sys

from pipeline.common.quiet import configure, verbose_requested

configure(verbose_requested(sys.argv[1:]))  # before anything imports TensorFlow
from pipeline.pca.command import main  # noqa: E402

sys.exit(main())
