"""`python -m pipeline.run`: the embedding job (`beam-embed run`), kept as a thin entry point."""

import sys

from pipeline.job.command import main

if __name__ == "__main__":
    sys.exit(main())
