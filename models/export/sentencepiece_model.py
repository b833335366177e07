"""A SentencePiece model file (`sentencepiece.bpe.model`, a serialized ModelProto) read and
written without the sentencepiece library: its pieces, scores and types, its normaliser's
precompiled character map, and XLM-RoBERTa's vocabulary over the pieces.

XLM-RoBERTa keeps fairseq's dictionary order: `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, then the
SentencePiece ids shifted by one (the model's own `<unk>`, `<s>`, `</s>` at 0-2 give way to the
four specials), and `<mask>` last. The exported preprocessor computes the same shift in its graph.
Only the pieces are read: tensorflow-text's SentencepieceTokenizer takes the file's bytes whole.
"""

from __future__ import annotations

import dataclasses
import struct

from beam_embed.models.export.checkpoint import CheckpointError

SENTENCEPIECE_MODEL = "sentencepiece.bpe.model"
NORMAL, UNKNOWN, CONTROL = 1, 2, 3  # SentencePiece.Type values (a missing type means NORMAL)
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
FAIRSEQ_OFFSET = 1  # XLM-R id = SentencePiece id + 1, for every piece past the model's specials
MASK = "<mask>"
# The model's own first three pieces, which fairseq's four specials replace.
SP_SPECIALS = ((UNKNOWN, "<unk>"), (CONTROL, "<s>"), (CONTROL, "</s>"))
WORD_START = "\u2581"  # "▁": SentencePiece's mark of a piece that begins a word


@dataclasses.dataclass(frozen=True)
class Piece:
    piece: str
    score: float
    type: int


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ValueError("a varint runs past the end")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def _fields(data: bytes):
    """(field number, wire type, value) of one protobuf message, in order."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire} is not one a ModelProto uses")
        if pos > len(data):
            raise ValueError("a field runs past the end")
        yield number, wire, value


def read_pieces(data: bytes, where: str) -> list[Piece]:
    """The model's pieces by SentencePiece id; a CheckpointError naming `where` if the bytes are
    not a SentencePiece model."""
    pieces = []
    try:
        for number, wire, value in _fields(data):
            if number != 1 or wire != 2:
                continue
            piece, score, kind = None, 0.0, NORMAL
            for n, w, v in _fields(value):
                if n == 1 and w == 2:
                    piece = v.decode("utf-8")
                elif n == 2 and w == 5:
                    score = struct.unpack("<f", v)[0]
                elif n == 3 and w == 0:
                    kind = v
            if piece is None:
                raise ValueError(f"piece {len(pieces)} has no text")
            pieces.append(Piece(piece, score, kind))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{where} is not a SentencePiece model ({e}); re-download "
                              "it") from e
    if not pieces:
        raise CheckpointError(f"{where} holds no SentencePiece pieces; re-download it")
    return pieces


def normalizer_charsmap(data: bytes) -> bytes:
    """The normaliser's precompiled character map (NormalizerSpec field 2), b"" if none."""
    for number, wire, value in _fields(data):
        if number == 3 and wire == 2:
            return next((v for n, w, v in _fields(value) if n == 2 and w == 2), b"")
    return b""


def _key(number: int, wire: int) -> bytes:
    return _encode_varint(number << 3 | wire)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _message(number: int, body: bytes) -> bytes:
    return _key(number, 2) + _encode_varint(len(body)) + body


def _varint_field(number: int, value: int) -> bytes:
    return _key(number, 0) + _encode_varint(value)


def write_unigram_model(pieces: list[Piece], charsmap: bytes) -> bytes:
    """A unigram ModelProto: the pieces (SentencePiece's ids: <unk>, <s>, </s> first), the
    trainer's defaults for those ids (0, 1, 2, no <pad>), and a normaliser of the precompiled
    `charsmap` that adds the "▁" prefix, collapses whitespace and escapes it (each default)."""
    body = b"".join(_message(1, _message(1, p.piece.encode("utf-8")) + _key(2, 5)
                             + struct.pack("<f", p.score) + _varint_field(3, p.type))
                    for p in pieces)
    trainer = _varint_field(3, 1) + _varint_field(4, len(pieces))  # model_type UNIGRAM
    normalizer = (_message(1, b"user_defined") + _message(2, charsmap) + _varint_field(3, 1)
                  + _varint_field(4, 1) + _varint_field(5, 1))
    return body + _message(2, trainer) + _message(3, normalizer)


def xlmr_vocabulary(pieces: list[Piece], where: str) -> list[str]:
    """XLM-RoBERTa's vocabulary by id over the SentencePiece model's pieces (fairseq's order)."""
    head = tuple((p.type, p.piece) for p in pieces[:len(SP_SPECIALS)])
    if head != SP_SPECIALS:
        raise CheckpointError(
            f"{where}: its first pieces are {[p for _, p in head]} (types {[t for t, _ in head]}) "
            f"where an XLM-RoBERTa SentencePiece model has {[p for _, p in SP_SPECIALS]} as "
            "unknown, control, control; fairseq's id offset would map its ids wrongly")
    vocab = [*FAIRSEQ_SPECIALS, *(p.piece for p in pieces[len(SP_SPECIALS):]), MASK]
    bad = [p for p in vocab if "\n" in p or "\r" in p]
    if bad:
        raise CheckpointError(f"{where}: pieces {bad[:3]!r} hold a line break, which the "
                              "export's vocabulary file cannot")
    return vocab
