"""What an export folder is called and which version of it this code writes (no TensorFlow:
the job reads these on its start-up path, before any model is exported or loaded)."""

METADATA_FILE = "beam_embed.json"
# 2: the preprocessor has tokenize_with_offsets; 3: encoder.bf16/.fp16; 4: encoder.fp32 (fused);
# 5: bf16/fp16 as their own SavedModels beside encoder/ (encoder_bf16/, encoder_fp16/)
FORMAT_VERSION = 5


def precision_folder(encoder: str, precision: str) -> str:
    """Where an export keeps the encoder for a low precision: `encoder/` -> `encoder_bf16/`."""
    return f"{encoder.rstrip('/')}_{precision}"
