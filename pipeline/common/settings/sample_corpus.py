"""The bundled sample corpus: deterministic sentences on distinct topics (JSON Lines with a
`topic` field), written by the project itself so the default run, the PCA plot and the sample
pairs of `beam-embed eval` need no data."""

from __future__ import annotations

import json
import os
import random

TOPICS = {
    "cooking": (["The chef", "My grandmother", "The baker", "A home cook", "The pastry team"],
                ["simmered", "roasted", "seasoned", "kneaded", "caramelized", "whisked"],
                ["the tomato sauce", "a loaf of sourdough", "the garlic and onions",
                 "fresh basil pesto", "the chocolate ganache", "a pot of lentil soup"],
                ["before dinner.", "over low heat.", "for the holiday feast.", "with olive oil."]),
    "astronomy": (["The telescope", "An astronomer", "The space probe", "The observatory",
                   "A research team"],
                  ["observed", "photographed", "measured", "detected", "mapped", "tracked"],
                  ["a distant galaxy", "the rings of Saturn", "a supernova remnant",
                   "the cosmic microwave background", "an exoplanet transit", "a comet's tail"],
                  ["last night.", "in infrared light.", "near the galactic center.",
                   "during the eclipse."]),
    "football": (["The striker", "The goalkeeper", "The home team", "The coach", "The midfielder"],
                 ["scored", "defended", "celebrated", "missed", "won", "lost"],
                 ["a penalty kick", "the league title", "the derby match", "a header",
                  "the cup final", "an away game"],
                 ["in extra time.", "in front of the fans.", "after a long season.",
                  "despite the rain."]),
    "finance": (["The central bank", "Investors", "The stock market", "The bank", "Analysts"],
                ["raised", "cut", "forecast", "reported", "sold", "bought"],
                ["interest rates", "quarterly earnings", "government bonds", "the inflation outlook",
                 "tech shares", "the currency reserves"],
                ["this quarter.", "amid recession fears.", "after the announcement.",
                 "on Monday."]),
    "medicine": (["The doctor", "A nurse", "The surgeon", "The clinical trial", "Researchers"],
                 ["treated", "diagnosed", "vaccinated", "examined", "operated on", "studied"],
                 ["the patient's infection", "a rare heart condition", "elderly patients",
                  "the broken femur", "a new antibiotic", "chronic migraines"],
                 ["at the hospital.", "with promising results.", "in the emergency room.",
                  "over six months."]),
    "programming": (["The developer", "Our build server", "The compiler", "A code reviewer",
                     "The test suite"],
                    ["refactored", "compiled", "debugged", "deployed", "profiled", "rejected"],
                    ["the database schema", "a memory leak", "the Python module",
                     "the REST API", "a race condition", "the pull request"],
                    ["before the release.", "in production.", "on the CI pipeline.",
                     "late at night."]),
}


def sentences(per_topic: int = 100, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for topic, (subjects, verbs, objects, tails) in TOPICS.items():
        seen = set()
        while len(seen) < per_topic:
            text = " ".join(rng.choice(part) for part in (subjects, verbs, objects, tails))
            if text not in seen:
                seen.add(text)
                rows.append({"id": f"{topic}-{len(seen):03d}", "text": text, "topic": topic})
    rng.shuffle(rows)
    return rows


def write_sample_corpus(path: str, per_topic: int = 100) -> str:
    """Writes the corpus once; later runs reuse the file."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for row in sentences(per_topic):
                f.write(json.dumps(row) + "\n")
    return path
