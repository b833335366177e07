"""The job on real sentence embeddings: all-MiniLM-L6-v2 (the packaged checkpoint, exported to
the TF-Hub BERT contract), mean-pooled over real tokens and L2-normalised; six topics."""

import numpy as np
import pytest
from sklearn.decomposition import PCA

from beam_embed.pipeline.pca.command import main
from beam_embed.pipeline.pca.fit import load_fit
from tests.pca.fixtures import (
    FLOAT32_RTOL,
    assert_close,
    pcs_of,
    read_projections,
    records,
    write_embeddings,
)

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

TOPICS = {
    "cooking": ["Simmer the tomato sauce slowly with garlic and basil.",
                "Knead the bread dough until it is smooth and elastic.",
                "Sear the steak in a hot cast iron pan with butter.",
                "Whisk the eggs and sugar before folding in the flour.",
                "Roast the vegetables with olive oil and rosemary.",
                "Let the soup cool before blending it into a puree."],
    "astronomy": ["The telescope captured a distant spiral galaxy.",
                  "Jupiter has dozens of moons orbiting around it.",
                  "A supernova can outshine its entire host galaxy.",
                  "Astronomers measured the redshift of the quasar.",
                  "The comet's tail always points away from the sun.",
                  "Saturn's rings are made mostly of ice particles."],
    "football": ["The striker scored a late goal to win the match.",
                 "The goalkeeper saved a penalty in extra time.",
                 "The referee showed a red card to the defender.",
                 "Fans filled the stadium for the championship final.",
                 "The coach changed tactics at half time.",
                 "The midfielder passed the ball to the winger."],
    "finance": ["The central bank raised interest rates again.",
                "Stock markets fell after the inflation report.",
                "Investors moved their savings into government bonds.",
                "The company reported record quarterly earnings.",
                "Mortgage payments rose as borrowing costs increased.",
                "The currency weakened against the dollar."],
    "medicine": ["The patient was prescribed antibiotics for the infection.",
                 "A vaccine trains the immune system to fight a virus.",
                 "The surgeon repaired the torn ligament in the knee.",
                 "High blood pressure raises the risk of stroke.",
                 "The nurse measured the child's fever every hour.",
                 "Insulin helps regulate blood sugar levels."],
    "computing": ["The compiler reported a syntax error on line ten.",
                  "Restart the server after updating the database.",
                  "The algorithm sorts the list in logarithmic time.",
                  "Write unit tests before refactoring the code.",
                  "The laptop's processor has eight cores.",
                  "Encrypt the password before storing it."],
}


@pytest.fixture(scope="session")
def minilm_vectors(minilm_export):
    """[sentences, 384] float32 vectors (from conftest's MiniLM export) and each one's topic."""
    import tensorflow as tf

    pre = tf.saved_model.load(f"{minilm_export}/preprocessor")
    enc = tf.saved_model.load(f"{minilm_export}/encoder")
    sentences = [s for texts in TOPICS.values() for s in texts]
    inputs = pre.bert_pack_inputs([pre.tokenize(tf.constant(sentences))], seq_length=32)
    tokens = enc(inputs)["sequence_output"]
    mask = tf.cast(inputs["input_mask"], tf.float32)[..., None]
    mean = tf.reduce_sum(tokens * mask, axis=1) / tf.reduce_sum(mask, axis=1)
    vectors = tf.math.l2_normalize(mean, axis=-1).numpy().astype(np.float32)
    topics = [t for t, texts in TOPICS.items() for _ in texts]
    return sentences, vectors, topics


def test_real_embeddings_match_sklearn(tmp_path, minilm_vectors):
    sentences, x, topics = minilm_vectors
    assert x.shape == (36, 384)
    table = records({"mean": x}, texts=sentences, meta={"topic": topics})
    write_embeddings(str(tmp_path / "emb"), table, shards=3, row_group_size=5,
                     normalize={"mean": True})
    assert main(["--input", str(tmp_path / "emb"), "--output", str(tmp_path / "viz"),
                 "--components", "10", "--color-by", "topic"]) == 0

    ref = PCA(10, svd_solver="full").fit(x.astype(np.float64))
    fit = load_fit(str(tmp_path / "viz" / "pca.npz"))
    assert_close(fit.components, ref.components_, rtol=FLOAT32_RTOL)
    assert_close(fit.explained_variance, ref.explained_variance_)
    assert_close(fit.explained_variance_ratio, ref.explained_variance_ratio_)
    projected = pcs_of(read_projections(str(tmp_path / "viz")))
    assert_close(projected, ref.transform(x.astype(np.float64)), rtol=FLOAT32_RTOL)

    # ten components keep the topics apart: leave one sentence out, the nearest topic centroid
    # of the others is its own (chance: 1 in 6)
    labels = np.array(topics)
    hits = 0
    for i in range(len(labels)):
        others = np.arange(len(labels)) != i
        centroids = {t: projected[others & (labels == t)].mean(axis=0) for t in TOPICS}
        nearest = min(centroids, key=lambda t: np.linalg.norm(projected[i] - centroids[t]))
        hits += nearest == labels[i]
    assert hits / len(labels) >= 0.85
