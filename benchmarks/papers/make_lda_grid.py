"""Compute ``benchmarks/data/lda_synthetic_grid.csv``, the online-LDA grid that stands in for
the LDA-grid of the Mondrian regression paper's Table 3 (HPOlib's ``lda_on_grid``: Snoek,
Larochelle & Adams 2012, online LDA on Wikipedia articles; neither the grid nor its corpus
is obtainable here).

The grid is Snoek et al.'s: the learning-rate decay kappa in {0.5, ..., 1.0} (6 values),
the learning offset tau0 in {1, 4, ..., 1024} (6, powers of 4) and the mini-batch size in
{1, 4, ..., 16384} (8, powers of 4), 288 points. Each point is one pass of scikit-learn's
``LatentDirichletAllocation`` (online variational Bayes, Hoffman, Blei & Bach 2010, the
algorithm of the original grid) over a stream of :data:`N_TRAIN` documents, 10 topics; its
value is the perplexity of :data:`N_TEST` held-out documents (scikit-learn's variational
bound), to be minimised as the original's.

The corpus is synthetic, drawn from an LDA model (:func:`corpus`): 10 topics over a
500-word vocabulary, topic-word weights ~ Dirichlet(0.05), document-topic weights ~
Dirichlet(0.1), 5 + Poisson(40) words per document. The stream holds 8,192 documents, so
every batch size of the grid is a different number of updates (8,192 down to 2, and one
update of the whole stream at 16,384); that size makes the whole grid about 10 minutes of
CPU (2 s a point; 51 minutes of wall time on the loaded 2-core machine). Run once::

    PYTHONPATH=. python -m benchmarks.papers.make_lda_grid
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "data" / "lda_synthetic_grid.csv"
KAPPAS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
TAU0S = tuple(4**i for i in range(6))
BATCH_SIZES = tuple(4**i for i in range(8))
TOPICS, VOCABULARY, N_TRAIN, N_TEST = 10, 500, 8_192, 1_000
WORDS_PER_DOC = 40


def corpus(n_docs: int, beta: np.ndarray, rng: np.random.Generator):
    """``n_docs`` documents drawn from the LDA model with topics ``beta``, as word counts."""
    import scipy.sparse as sp

    theta = rng.dirichlet(np.full(beta.shape[0], 0.1), size=n_docs)
    lengths = 5 + rng.poisson(WORDS_PER_DOC, size=n_docs)
    counts = np.stack([rng.multinomial(n, p) for n, p in zip(lengths, theta @ beta,
                                                             strict=True)])
    return sp.csr_matrix(counts)


def main() -> int:
    from sklearn.decomposition import LatentDirichletAllocation

    rng = np.random.default_rng(0)
    beta = rng.dirichlet(np.full(VOCABULARY, 0.05), size=TOPICS)
    train, test = corpus(N_TRAIN, beta, rng), corpus(N_TEST, beta, rng)
    rows = ["kappa,tau0,batch_size,perplexity"]
    start = time.perf_counter()
    for kappa, tau0, size in itertools.product(KAPPAS, TAU0S, BATCH_SIZES):
        lda = LatentDirichletAllocation(
            n_components=TOPICS, learning_method="online", learning_decay=kappa,
            learning_offset=float(tau0), batch_size=size, max_iter=1, total_samples=N_TRAIN,
            evaluate_every=-1, random_state=0)
        lda.fit(train)
        rows.append(f"{kappa:.1f},{tau0},{size},{lda.perplexity(test):.4f}")
        print(rows[-1], f"{time.perf_counter() - start:.0f}s", flush=True)
    OUT.write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
