"""Bootstrap weights and seeds of the tree ensembles.

A Bayesian forest (Taddy, Chen, Yu & Wyle 2015, Sec. 2.1-2.3, Algorithm 1) fits every tree
with weights ``theta_i ~ iid Exp(1)``: the un-normalised Dirichlet(1) posterior weights of the
Bayesian bootstrap (Rubin 1981). Breiman's random forest differs only in the weights:
Poisson(1) counts, the large-sample limit of multinomial resampling (Sec. 2.3). ``"none"``
gives every row weight one (a plain CART tree, ``T(1)`` in the paper's notation).

Seeds follow the contract of ``docs/architecture.md``: tree ``t`` of branch ``b`` draws from
``SeedSequence(entropy, spawn_key=(b, t))``, so a seed never depends on the order in which
trees or branches are fit, nor on the number of threads or workers.
"""

from __future__ import annotations

import numpy as np

__all__ = ["WEIGHT_KINDS", "branch_seed", "draw_weights", "tree_rng"]

#: Bootstrap weight kinds: Bayesian bootstrap, Breiman's bootstrap, no bootstrap.
WEIGHT_KINDS = ("exponential", "poisson", "none")

def draw_weights(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Draw one tree's bootstrap weights for ``n`` rows.

    Parameters
    ----------
    kind : {"exponential", "poisson", "none"}
        ``"exponential"``: ``Exp(1)``, the Bayesian bootstrap of Algorithm 1 (Sec. 2.3).
        ``"poisson"``: ``Poisson(1)`` counts, Breiman's bootstrap (random forest).
        ``"none"``: all ones (consumes no randomness).
    n : int
        Number of rows.
    rng : numpy.random.Generator
        Source of randomness, usually :func:`tree_rng`.

    Returns
    -------
    ndarray of shape (n,), float64

    Examples
    --------
    >>> w = draw_weights("poisson", 5, np.random.default_rng(0))
    >>> w.dtype, bool(np.all(w == np.round(w)))
    (dtype('float64'), True)
    >>> draw_weights("none", 3, np.random.default_rng(0)).tolist()
    [1.0, 1.0, 1.0]
    """
    n = int(n)
    if kind == "exponential":
        return rng.standard_exponential(n)
    if kind == "poisson":
        return rng.poisson(1.0, n).astype(np.float64)
    if kind == "none":
        return np.ones(n)
    raise ValueError(f"Unknown bootstrap weights {kind!r}; use one of {list(WEIGHT_KINDS)}.")


def tree_rng(entropy: int, branch: int, tree: int) -> np.random.Generator:
    """The random generator of one tree: ``SeedSequence(entropy, spawn_key=(branch, tree))``.

    Parameters
    ----------
    entropy : int
        Non-negative seed of the whole model (see :func:`basics.seeds.resolve_entropy`).
    branch : int
        Branch id (trunk leaf) of an Empirical Bayesian Forest; 0 for a Bayesian forest, so
        that an EBF with a one-leaf trunk equals a BF with the same seed.
    tree : int
        Index of the tree in its branch.

    Returns
    -------
    numpy.random.Generator

    Examples
    --------
    >>> a = tree_rng(7, 0, 3).random()
    >>> b = tree_rng(7, 0, 3).random()
    >>> a == b, a == tree_rng(7, 1, 3).random()
    (True, False)
    """
    seq = np.random.SeedSequence(int(entropy), spawn_key=(int(branch), int(tree)))
    return np.random.default_rng(seq)


def branch_seed(entropy: int, branch: int) -> int:
    """Integer seed of a whole branch: ``SeedSequence(entropy, spawn_key=(branch,))``.

    For branch learners that take one ``random_state`` (Mondrian forests) rather than a
    generator per tree. The key ``(branch,)`` never collides with the tree keys
    ``(branch, tree)`` of :func:`tree_rng`.

    Parameters
    ----------
    entropy : int
        Non-negative seed of the whole model.
    branch : int
        Branch id (trunk leaf or sub-sample).

    Returns
    -------
    int
        A seed in ``[0, 2**32)``.

    Examples
    --------
    >>> branch_seed(7, 0) == branch_seed(7, 0) != branch_seed(7, 1)
    True
    """
    seq = np.random.SeedSequence(int(entropy), spawn_key=(int(branch),))
    return int(seq.generate_state(1)[0])
