"""The numbers the PCA job's flags default to and are checked against, in a module that imports
nothing: `beam-embed pca --help` shows them without loading Beam."""

DEFAULT_COMPONENTS, DEFAULT_SAMPLE = 50, 10_000
PROJECTOR_LIMIT = 100_000  # the most points the TensorBoard projector loads
