"""Encoders, poolers and the Hugging Face -> TF-Hub exporter of beam-embed."""
