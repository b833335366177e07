"""What an export folder is called and which version of it this code writes (no TensorFlow:
the job reads these on its start-up path, before any model is exported or loaded)."""

METADATA_FILE = "beam_embed.json"
# 2: the preprocessor has tokenize_with_offsets; 3: encoder.bf16/.fp16; 4: encoder.fp32 (fused)
FORMAT_VERSION = 4
