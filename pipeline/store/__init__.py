"""`beam-embed store`: a finished run loaded into vector stores."""
