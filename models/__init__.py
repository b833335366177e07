"""Models: the bottom layer, imported by every command and by Beam workers.

    encoder.py        the Encoder interface every kind implements
    encoders/         the registry of kinds (TensorFlow-free facts), one module per kind
                      (bert, bert_tf1, elmo, text_in), and detect.py: the kind of a lone handle
    spec.py           EncoderSpec and encoder_spec(), the one constructor from a preset,
                      an export folder or handles plus flags
    presets.py        configs/models.yaml presets -> handles (exporting checkpoints on first use)
    pooling.py        named poolers over an EncoderOutput
    embedder.py       texts -> one vector per pooling (truncation, chunking, batch planning)
    tokens.py         texts -> token-level vectors with offsets
    saved_model.py    a SavedModel's fingerprint and position count, read without loading it
                      (the Encoder interface's defaults for SavedModel kinds)
    hub_loader.py     loading a handle (URL, gs://, folder) once per process, one clear error
    gcs_copy.py       a gs:// model's local copy in the cache, fetched through Beam's filesystem
    export_cache.py   the cache folder: presets' exports keyed by the checkpoint's content, its
                      entries (listed and cleared by `beam-embed cache`)
    tf_import.py      TensorFlow and tensorflow-text's ops without the Keras a run never calls
    export_format.py  an export folder's metadata file name, format version and check: read by
                      runs, written by export/ (no TensorFlow)
    bert_preprocessor.py  the TF-Hub BERT preprocessor contract: saved by export/, built at run
                      time for TF1 Hub BERT modules
    cpu.py            the CPU features that decide whether bf16 is fast here
    accelerators.py   --accelerator: the device asked for, found or refused once per process, and
                      the tf.distribute strategy (TPUStrategy on a TPU) the encoder runs under
    fixed_shapes.py   one batch size per length bucket: the few shapes an XLA encoder runs in
    xla.py            an encoder's call compiled with XLA, run under a strategy
    export/           `export-model` only: checkpoint folders (Hugging Face, google-research/bert)
                      -> TF-Hub-format SavedModels

May import: nothing of `pipeline`. TensorFlow only where a model is built or run (encoders,
embedder, tokens, export, accelerators, xla): spec.py, encoders/__init__.py, pooling.py,
presets.py, cpu.py, fixed_shapes.py, export_format.py, tf_import.py, saved_model.py,
gcs_copy.py, export_cache.py and hub_loader.py import none at module import time.
"""
