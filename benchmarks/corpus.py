"""A deterministic English-like benchmark corpus: the length mix of the project's speed measurements.

    .venv/bin/python benchmarks/corpus.py OUT.txt [--sentences 20000] [--seed 8]

Sentences are drawn from a built-in vocabulary of common English words (Zipf-weighted, so
frequent words are frequent) with a few rarer long words that WordPiece splits, numbers, names,
commas and end punctuation. Lengths: 95% short (mean ~11 words, 3..40), 5% long (40..120 words),
for a mean of ~15 words and ~22 MiniLM tokens per sentence including [CLS]/[SEP]. The same seed
and count always give the same file, so runs on different days compare. Pure Python: both the
project's venv and a sentence-transformers venv can import it.
"""

from __future__ import annotations

import argparse
import random

COMMON = """the of and to a in is that for it as was with be by on not he i this are or his
from at which but have an they you were her she there one all we their been has would when who
will more no if out so said what up its about than into them can only other new some could time
these two may then do first any my now such like our over man me even most made after also did
many before must through back years where much your way well down should because each just
those people how too little state good very make world still own see men work long get here
between both life being under never day same another know while last might us great old year
off come since against go came right used take three states himself few house use during without
again place american around however home small found thought went say part once general high
upon school every don does got united left number course war until always away something fact
though water less public put think almost hand enough far took head yet government system better
set told nothing night end why called didn eyes find going look asked later knew point next city
business give group toward young days let room president side social given present several order
national possible rather second face per among form important often things looked early white
john become case large need big four within felt children along saw best church ever least power
development light thing seemed family interest want members mind country area others done turned
although open god service problem certain kind different thus began door help means sense whole
matter perhaps itself york times law human line above name example action company hands local
show whether five history gave today either act feet across taken past quite anything seen having
death experience body word half really week field car words already themselves information tell
together college shall money period held keep sure probably free seems political real behind
cannot miss question air office making brought whose special major heard problems federal became
study ago moment available known result street economic boy position reason change south board
individual job society areas west close turn love community true court force full seem am front
market research music students report model phone data network city river mountain coffee
morning evening dinner weather garden village train station bridge museum hospital doctor
teacher student price picture story movie song book paper letter table window computer screen
""".split()
RARE = """photosynthesis infrastructure cryptocurrency thermodynamics neurotransmitter
jurisprudence biodiversity microprocessor archaeologist choreography kaleidoscope
parliamentary reconnaissance entrepreneurship immunotherapy semiconductor hydroelectric
unprecedented interdisciplinary misinterpretation acknowledgement bureaucratic
epidemiological constitutionality decentralization electromagnetic""".split()
NAMES = """Alice Bob Maria Chen Tokyo Paris Berlin Nairobi Lagos Amazon Google Python
Kubernetes Beethoven Shakespeare Einstein Sahara Himalaya Mississippi Istanbul Reykjavik""".split()
ENDINGS = (".", ".", ".", ".", "?", "!")


def _zipf_weights(n: int) -> list[float]:
    return [1.0 / (rank + 2) ** 0.9 for rank in range(n)]


def _length(rng: random.Random) -> int:
    if rng.random() < 0.05:
        return rng.randint(40, 120)
    return min(max(int(rng.lognormvariate(2.4, 0.45)), 3), 40)


def _sentence(rng: random.Random, n: int, weights: list[float]) -> str:
    words = rng.choices(COMMON, weights=weights, k=n)
    for i in range(n):
        r = rng.random()
        if r < 0.085:
            words[i] = rng.choice(RARE)
        elif r < 0.11:
            words[i] = rng.choice(NAMES)
        elif r < 0.13:
            words[i] = str(rng.randint(2, 2030))
        elif r < 0.15:
            words[i] += "'s"
        elif r < 0.21 and 0 < i < n - 1:
            words[i] += ","
    words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words) + rng.choice(ENDINGS)


def sentences(count: int = 20_000, seed: int = 8):
    """Yields `count` sentences, deterministically for a given seed."""
    rng = random.Random(seed)
    weights = _zipf_weights(len(COMMON))
    for _ in range(count):
        yield _sentence(rng, _length(rng), weights)


def write(path: str, count: int = 20_000, seed: int = 8) -> str:
    """A text file, one sentence a line (the job's `text` input format)."""
    with open(path, "w", encoding="utf-8") as f:
        for s in sentences(count, seed):
            f.write(s + "\n")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=8)
    args = ap.parse_args(argv)
    write(args.out, args.sentences, args.seed)
    print(f"wrote {args.sentences} sentences to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
