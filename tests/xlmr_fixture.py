"""A random tiny XLM-RoBERTa in a sentence-transformers folder, made in the test (no multilingual
weights ship on PyPI): a SentencePiece unigram model trained here on a few languages, config.json
with `model_type: xlm-roberta`, model.safetensors under Hugging Face's names (as
sentence-transformers saves XLMRobertaModel: no prefix), modules.json with mean pooling and
Normalize."""

from __future__ import annotations

import io
import json
import os

import numpy as np

LAYERS, WIDTH, HEADS, INNER = 2, 16, 2, 32
MAX_POSITIONS = 66  # 64 usable: XLM-R's first two rows precede position 0
ST = "sentence_transformers.models."
TRAINING = [
    "the quick brown fox jumps over the lazy dog and the cat sleeps",
    "Le café est déjà prêt, où est la crème brûlée? Noël à Paris.",
    "Привет, мир! Как дела сегодня? Москва большая и красивая.",
    "東京は日本の首都です。北京是中国的首都。我们喜欢学习语言。",
    "مرحبا بالعالم، كيف حالك اليوم؟ القاهرة مدينة كبيرة.",
    "naïve façade Ångström über Straße señor São Paulo",
    "서울은 한국의 수도입니다. 감사합니다.",
    "emoji time 🙂 rocket 🚀 party 🎉 numbers 12345 and more words here",
]
# Multilingual texts the tests embed: CJK, Arabic, Cyrillic, accents, emoji (some never trained
# on: unknown pieces), spacing, an empty text.
TEXTS = [
    "the cat sleeps over the lazy dog",
    "Привет, мир! Москва",
    "東京は日本の首都です",
    "北京是中国的首都",
    "مرحبا بالعالم",
    "crème brûlée à Paris, Ångström",
    "rocket 🚀 and 🦄 unicorn 🙂",
    "  spaced   out\ttext  ",
    "서울 감사합니다 ṩ ﬁne",
    "",
]


def train_sentencepiece(vocab_size: int = 220) -> bytes:
    """A unigram SentencePiece model with XLM-R's ids: <unk>=0, <s>=1, </s>=2, no <pad>."""
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAINING * 30), model_writer=out, vocab_size=vocab_size,
        model_type="unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        character_coverage=0.995, hard_vocab_limit=False, minloglevel=2,
        normalization_rule_name="nmt_nfkc")
    return out.getvalue()


def hf_weights(vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights under Hugging Face's XLMRobertaModel names (Linear weights [out, in])."""
    rng = np.random.default_rng(seed)

    def r(*shape, scale=0.3):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": r(vocab, WIDTH),
         "embeddings.position_embeddings.weight": r(MAX_POSITIONS, WIDTH),
         "embeddings.token_type_embeddings.weight": r(1, WIDTH),
         "embeddings.LayerNorm.weight": 1 + r(WIDTH, scale=0.1),
         "embeddings.LayerNorm.bias": r(WIDTH, scale=0.1),
         "pooler.dense.weight": r(WIDTH, WIDTH), "pooler.dense.bias": r(WIDTH, scale=0.1)}
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name, (n_out, n_in) in {"attention.self.query": (WIDTH, WIDTH),
                                    "attention.self.key": (WIDTH, WIDTH),
                                    "attention.self.value": (WIDTH, WIDTH),
                                    "attention.output.dense": (WIDTH, WIDTH),
                                    "intermediate.dense": (INNER, WIDTH),
                                    "output.dense": (WIDTH, INNER)}.items():
            w[p + name + ".weight"] = r(n_out, n_in)
            w[p + name + ".bias"] = r(n_out, scale=0.1)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + norm + ".weight"] = 1 + r(WIDTH, scale=0.1)
            w[p + norm + ".bias"] = r(WIDTH, scale=0.1)
    return w


def _write_json(path: str, value) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def write_xlmr(root: str, seed: int = 0, proto: bytes | None = None) -> dict[str, np.ndarray]:
    """The folder at `root`; returns the weights written."""
    import sentencepiece as spm
    from safetensors.numpy import save_file

    proto = proto or train_sentencepiece()
    vocab = spm.SentencePieceProcessor(model_proto=proto).get_piece_size() + 2
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "sentencepiece.bpe.model"), "wb") as f:
        f.write(proto)
    _write_json(os.path.join(root, "config.json"), {
        "model_type": "xlm-roberta", "architectures": ["XLMRobertaModel"],
        "vocab_size": vocab, "hidden_size": WIDTH, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "intermediate_size": INNER, "hidden_act": "gelu",
        "max_position_embeddings": MAX_POSITIONS, "type_vocab_size": 1,
        "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
        "position_embedding_type": "absolute"})
    _write_json(os.path.join(root, "tokenizer_config.json"),
                {"model_max_length": MAX_POSITIONS - 2, "tokenizer_class": "XLMRobertaTokenizer"})
    weights = hf_weights(vocab, seed)
    save_file(weights, os.path.join(root, "model.safetensors"))
    _write_json(os.path.join(root, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": ST + "Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": ST + "Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": ST + "Normalize"}])
    _write_json(os.path.join(root, "1_Pooling", "config.json"),
                {"word_embedding_dimension": WIDTH, "pooling_mode_mean_tokens": True})
    _write_json(os.path.join(root, "sentence_bert_config.json"),
                {"max_seq_length": MAX_POSITIONS - 2, "do_lower_case": False})
    return weights


def write_tokenizer_json(root: str) -> None:
    """`root`'s tokenizer.json as transformers' XLM-R converter writes it, built with the
    `tokenizers` library: a Unigram model over fairseq's ids, the SentencePiece model's
    precompiled normaliser then ' {2,}' -> ' ', a Metaspace pre-tokeniser."""
    import sentencepiece as spm
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import Unigram

    from beam_embed.models.export.sentencepiece_model import normalizer_charsmap

    with open(os.path.join(root, "sentencepiece.bpe.model"), "rb") as f:
        proto = f.read()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0),
             *((sp.id_to_piece(i), sp.get_score(i)) for i in range(3, sp.get_piece_size())),
             ("<mask>", 0.0)]
    tokenizer = Tokenizer(Unigram(vocab, 3, False))
    tokenizer.normalizer = normalizers.Sequence([
        normalizers.Precompiled(normalizer_charsmap(proto)),
        normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.save(os.path.join(root, "tokenizer.json"))
