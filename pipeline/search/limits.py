"""The numbers search's flags default to, in a module that imports nothing: `beam-embed search
--help` shows them without loading Beam, pyarrow or numpy."""

DEFAULT_K = 10
DEFAULT_BLOCK_ROWS = 16_384  # records scored per block: the scan's memory bound
DEFAULT_MAX_CHARS = 300
QUERY_SHOWN_CHARS = 200  # longest query echoed above its hits (the rest: "…")
COLLAPSE_CANDIDATES = 4  # collapsing: candidates per hit asked, grown by this while too few
