"""`export-model`: a BERT-family (BERT, XLM-RoBERTa) checkpoint folder -> TF-Hub-format
SavedModels plus metadata.

    convert.py            export_checkpoint(): inspect, read and map the weights, save the
                          encoders (fp32, bf16, fp16) and the preprocessor, write beam_embed.json
    checkpoint.py         what is known about a source checkpoint, and CheckpointError
    checkpoint_layout.py  which layout a folder holds, and its inspection and tensor reader
    hf_checkpoint.py      the Hugging Face layout (config.json, safetensors or PyTorch weights)
    google_checkpoint.py  the google-research/bert layout (bert_config.json, a TF checkpoint)
    weight_map.py         a checkpoint's tensor names -> the encoder's weights
    xlmr_checkpoint.py    what an XLM-RoBERTa folder adds: its SentencePiece tokenizer, positions
    sentencepiece_model.py  a SentencePiece model file read and written (pieces, character map)
    unigram_json.py       an XLM-R tokenizer.json rebuilt into its SentencePiece model
    xlmr_preprocessor.py  the preprocessor contract with SentencePiece and fairseq's ids
    bert_encoder.py       the forward pass that is saved: the TF-Hub BERT encoder contract

Only `export-model` (and a `checkpoint` preset's first use) imports this package: running an
export needs none of it. What both sides read stays beside the run-time code:
models/export_format.py (the folder's names, format version and check) and
models/bert_preprocessor.py (the preprocessor, which the TF1 Hub BERT kind also builds at run
time).
"""
