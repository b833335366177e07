"""`python -m pipeline.pca`: the PCA job (`beam-embed pca`)."""

import logging
import sys

from pipeline.pca.command import main

logging.basicConfig(level=logging.INFO)
sys.exit(main())
