"""Models: the bottom layer, imported by every command and by Beam workers.

    encoder.py        the Encoder interface every kind implements, and the numpy token units
                      (Units, Words) its tokenizers return
    encoders/         the registry of kinds (TensorFlow-free facts: poolings, precisions, token
                      layers, TPU length buckets), one module per kind (bert, bert_tf1, elmo,
                      text_in, keras_hub), and detect.py: the kind of a lone handle
    spec.py           EncoderSpec and encoder_spec(), the one constructor from a preset,
                      an export folder or handles plus flags
    encoder_choices.py  the values encoder flags take
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
    tf_import.py      TensorFlow and tensorflow-text's ops without the Keras a run never calls,
                      and without their start-up lines when the command asked for quiet
    warm_up.py        an encoder's load and first call on a background thread
    export_format.py  an export folder's metadata file name, format version and check: read by
                      runs, written by export/ (no TensorFlow)
    bert_preprocessor.py  the TF-Hub BERT preprocessor contract: saved by export/, built at run
                      time for TF1 Hub BERT modules
    cpu.py            the CPU features that decide whether bf16 is fast here
    accelerators.py   --accelerator: the device asked for, found or refused once per process, and
                      the tf.distribute strategy (TPUStrategy on a TPU) the encoder runs under
    fixed_shapes.py   length buckets, and one batch size per bucket: the few shapes an XLA
                      encoder runs in
    xla.py            an encoder's call compiled with XLA, run under a strategy
    export/           `export-model` only: checkpoint folders (Hugging Face, google-research/bert)
                      -> TF-Hub-format SavedModels

May import: nothing of `pipeline`; beam_embed.process (the process's tuning, the private-API
adapter). TensorFlow only where a model is built or run (the encoder kinds' modules, embedder,
export, accelerators, xla, bert_preprocessor): encoder.py, spec.py, encoder_choices.py,
encoders/__init__.py, pooling.py, tokens.py, presets.py, cpu.py, fixed_shapes.py,
export_format.py, tf_import.py, saved_model.py, gcs_copy.py, export_cache.py, hub_loader.py and
warm_up.py import none at module import time.
"""
