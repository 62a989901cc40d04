"""Run pymc-bart (the peer of ``bench_bart.py``) on one dataset, in its own environment.

pymc-bart pins numba and pytensor versions that conflict with ours, so it lives in a
separate virtual environment (the ``bart-peer`` extra) and ``bench_bart.py`` runs this
script there as a subprocess, exchanging ``.npz`` files. Only numpy, pymc and pymc-bart are
imported here.

The model is the BART of Chipman et al. (2010) as pymc-bart writes it: ``mu = BART(X, y, m,
alpha, beta)``, ``sigma^2 ~ InvGamma(nu / 2, nu * lambda / 2)``, ``y ~ N(mu, sigma^2)``,
sampled by pymc-bart's particle Gibbs (``num_particles`` particles) for the trees and NUTS
for ``sigma^2``, one chain. ``batch=(1.0, 1.0)`` makes every draw update all ``m`` trees, as
one iteration of Algorithm 4.1 does (pymc-bart's default updates 10% of the trees per draw).

Input (``--data``): ``X_train``, ``y_train``, ``X_test``. Output (``--out``): ``loglik``
(per kept draw, ``sum_n log N(y_n | mu_n, sigma^2)`` on the training rows), ``sigma2``
(per draw), ``mu_test`` (draws x test rows), ``sample_seconds`` (pm.sample, including its
compilation, which ``compile_seconds`` measures separately on a 2-draw warm-up run),
``predict_seconds``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--trees", type=int, default=200)
    p.add_argument("--particles", type=int, default=10)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--tune", type=int, default=1000)
    p.add_argument("--alpha", type=float, default=0.95)
    p.add_argument("--beta", type=float, default=2.0)
    p.add_argument("--nu", type=float, default=3.0)
    p.add_argument("--lam", type=float, required=True, help="scale of the sigma^2 prior")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def _model(X, y, cfg):
    import pymc as pm
    import pymc_bart as pmb

    with pm.Model() as model:
        data = pm.Data("X", X)
        mu = pmb.BART("mu", data, y, m=cfg.trees, alpha=cfg.alpha, beta=cfg.beta,
                      shape=data.shape[0])
        sigma2 = pm.InverseGamma("sigma2", alpha=cfg.nu / 2, beta=cfg.nu * cfg.lam / 2)
        pm.Normal("y", mu=mu, sigma=pm.math.sqrt(sigma2), observed=y, shape=mu.shape)
    return model


def _sample(model, cfg, draws, tune):
    import pymc as pm
    import pymc_bart as pmb

    with model:
        step = pmb.PGBART([model["mu"]], num_particles=cfg.particles, batch=(1.0, 1.0))
        return pm.sample(draws=draws, tune=tune, chains=1, cores=1, step=step,
                         random_seed=cfg.seed, progressbar=False, compute_convergence_checks=False)


def main(argv=None) -> None:
    cfg = parse_args(argv)
    import pymc as pm

    d = np.load(cfg.data)
    X, y, X_test = d["X_train"], d["y_train"], d["X_test"]
    t0 = time.perf_counter()
    _sample(_model(X, y, cfg), cfg, 2, 2)
    compile_seconds = time.perf_counter() - t0

    model = _model(X, y, cfg)
    t0 = time.perf_counter()
    idata = _sample(model, cfg, cfg.draws, cfg.tune)
    sample_seconds = time.perf_counter() - t0
    mu = idata.posterior["mu"].values[0]  # (draws, n_train)
    sigma2 = idata.posterior["sigma2"].values[0]
    loglik = (-0.5 * np.log(2 * np.pi * sigma2) * y.size
              - 0.5 * ((y[None, :] - mu) ** 2).sum(axis=1) / sigma2)

    t0 = time.perf_counter()
    with model:
        pm.set_data({"X": X_test})
        pred = pm.sample_posterior_predictive(idata, var_names=["mu"], random_seed=cfg.seed,
                                              progressbar=False)
    mu_test = pred.posterior_predictive["mu"].values[0]
    predict_seconds = time.perf_counter() - t0
    np.savez(cfg.out, loglik=loglik, sigma2=sigma2, mu_test=mu_test,
             sample_seconds=sample_seconds, compile_seconds=compile_seconds,
             predict_seconds=predict_seconds)


if __name__ == "__main__":
    main()
