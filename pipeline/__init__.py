"""The Beam pipelines of beam-embed: the embedding job and its follow-up steps."""
