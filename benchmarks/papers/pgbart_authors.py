"""The thesis authors' PG-BART code on our hypercube-D data sets, beside our sampler (issue 46).

Evidence for the causes of ``bart.table4_1`` and ``bart.traces``: does the authors' own
implementation (github.com/balajiln/pgbart, commit ff8b0c6, the code the thesis points to
for its scripts) mix on our data sets as ours does? It is Python 2; this script copies its
``src/`` out of a checkout (or a git directory, by ``git archive``), converts it with
``lib2to3`` and the textual patches of :data:`PATCHES` (``time.clock`` ->
``time.perf_counter``, removed in Python 3.8; one integer division; scalars for NumPy 2;
the prediction rules' ``exec`` given a namespace; nothing that changes a draw), and runs
``bart.py``'s ``main`` in a child process per chain with its ``load_data`` replaced by our data set:
:func:`ebf.bayestrees.diagnostics.hypercube` with the seed of the items (the same rows our
chains fit, the test labels replaced by the vertex values so its test MSE is ours).

The authors' settings are the thesis' (its README's hypercube commands): M = 1,
alpha_s = 0.95, beta_s per D (footnote 6), C = 10, ``init_pg=empty``, resampling at every
stage, the noise prior from the unconditional variance (its default), ``init_id = seed + 1``.
For each (D, seed) the authors' PG and CGM and our PG and CGM
(:func:`benchmarks.bench_bart_hypercube.chain`) run ``--n-iter`` iterations; the ESS of the
log-likelihood over the iterations after ``--burn-in`` (our :func:`chain_ess` on both
traces), the mean leaves after burn-in, and the first iteration whose draw has test MSE
below :data:`benchmarks.papers.thesis_bart.GOOD_MSE` (the true tree's fit). Writes
``benchmarks/results/issue46/<--out>.md`` and ``.json``. Run from the repository root::

    PYTHONPATH=. python -m benchmarks.papers.pgbart_authors --source PATH/TO/pgbart \\
        --dims 4 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.bench_bart_hypercube import BETA, chain
from benchmarks.papers.pgbart_mixing import OUT, save, spread
from benchmarks.papers.thesis_bart import GOOD_MSE
from ebf.bayestrees.diagnostics import chain_ess, hypercube

COMMIT = "ff8b0c6"
#: Python 3's exec cannot bind a function's locals: the prediction rules run in a namespace.
_EXEC = "_ns = {{'x': x, 'np': np}}; exec({}, _ns); leaf_id = _ns['leaf_id']"
#: Textual patches after lib2to3 (file, old, new): Python 3 removed time.clock; a true
#: division where Python 2 divided integers (only in its verbose summary); NumPy 2 no longer
#: converts a one-element array to a scalar (the same draws, indexed); exec's namespace.
PATCHES = (("bart.py", "time.clock()", "time.perf_counter()"),
           ("bart_utils.py", "time.clock()", "time.perf_counter()"),
           ("bart.py", "mcmc_stats_bart.shape[0] / 2", "mcmc_stats_bart.shape[0] // 2"),
           ("bart_utils.py", "return float(solution)", "return float(np.ravel(solution)[0])"),
           ("bart.py", "float(np.random.gamma(lambda_alpha, 1.0 / lambda_beta, 1))",
            "float(np.random.gamma(lambda_alpha, 1.0 / lambda_beta, 1)[0])"),
           ("bart.py", "float(np.random.randn(1) / np.sqrt(mu_prec_post))",
            "float(np.random.randn(1)[0] / np.sqrt(mu_prec_post))"),
           ("bart_utils.py", "size=1)[0]==1)[0])", "size=1)[0]==1)[0][0])"),
           ("bart.py", "exec(self.trees[i_t].rules)", _EXEC.format("self.trees[i_t].rules")),
           ("bart_utils.py", "exec(self.rules)", _EXEC.format("self.rules")))
SAMPLERS = ("pg", "cgm")

_RUNNER = """
import pickle, sys
sys.path.insert(0, sys.argv[1])
import bart
data = pickle.load(open(sys.argv[2], 'rb'))
bart.load_data = lambda settings: data
sys.argv = ['bart.py'] + sys.argv[3:]
bart.main()
"""


def prepare(source: Path, into: Path) -> Path:
    """The authors' ``src/`` at :data:`COMMIT`, converted to Python 3, under ``into``."""
    src = into / "src"
    if (source / "src" / "bart.py").exists():
        shutil.copytree(source / "src", src)
    else:  # a git directory (bare or not)
        git_dir = source / ".git" if (source / ".git").exists() else source
        tar = subprocess.run(["git", f"--git-dir={git_dir}", "archive", COMMIT, "src"],
                             check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    files = sorted(str(p) for p in src.glob("*.py"))
    subprocess.run([sys.executable, "-W", "ignore", "-m", "lib2to3", "-w", "-n",
                    "--no-diffs", *files], check=True, capture_output=True)
    for name, old, new in PATCHES:
        path = src / name
        text = path.read_text()
        if old not in text:
            raise RuntimeError(f"{name}: {old!r} not found; is this commit {COMMIT}?")
        path.write_text(text.replace(old, new))
    return src


def _data(dim: int, seed: int) -> tuple[dict, np.ndarray]:
    """Our data set of (dim, seed) in the authors' dict (test labels: the vertex values)."""
    X, y, f = hypercube(dim, 20, rng=seed)
    train = np.arange(y.size) % 20 < 10  # as bench_bart_hypercube.chain
    data = {"x_train": X[train], "y_train": y[train], "f_train": f[train],
            "x_test": X[~train], "y_test": f[~train], "f_test": f[~train],
            "n_dim": dim, "n_train": int(train.sum()), "n_test": int((~train).sum()),
            "is_sparse": False}
    return data, f[~train]


def authors_chain(src: Path, work: Path, dim: int, seed: int, sampler: str,
                  n_iter: int, burn_in: int) -> dict:
    """One chain of the authors' ``bart.py`` on our data set of (dim, seed)."""
    data, _ = _data(dim, seed)
    path = work / f"data-{dim}-{seed}.p"
    with open(path, "wb") as fh:
        pickle.dump(data, fh)
    out = work / f"out-{dim}-{seed}-{sampler}"
    out.mkdir()
    args = [f"--dataset=toy-hypercube-{dim}", "--m_bart=1", "--verbose=0", "--save=1",
            "--store_every_iteration=1", "--n_run_avg=1", f"--mcmc_type={sampler}",
            f"--n_iterations={n_iter}", f"--init_id={seed + 1}", "--alpha_split=0.95",
            f"--beta_split={BETA[dim]}", "--init_pg=empty", f"--op_dir={out}"]
    subprocess.run([sys.executable, "-c", _RUNNER, str(src), str(path), *args], check=True,
                   stdout=subprocess.DEVNULL, cwd=work)
    stats_file = next(p for p in out.glob("*.p") if not p.name.endswith("tree_predictions.p"))
    stats = pickle.load(open(stats_file, "rb"))["mcmc_stats_bart"]
    preds = pickle.load(open(next(out.glob("*tree_predictions.p")), "rb"))
    test_mse = preds["individual_perf_stats"][2]  # per draw, against the vertex values
    loglik, leaves, seconds = stats[:, 0], stats[:, 4], float(stats[:, 9].sum())
    return _summary("authors", dim, seed, sampler, loglik, leaves, test_mse, seconds, burn_in)


def _summary(code: str, dim: int, seed: int, sampler: str, loglik, leaves, test_mse,
             seconds: float, burn_in: int) -> dict:
    hit = np.flatnonzero(np.asarray(test_mse) < GOOD_MSE)
    ess = chain_ess(np.asarray(loglik)[burn_in:])
    return {"code": code, "D": dim, "seed": seed, "sampler": sampler, "ess": float(ess),
            "seconds": seconds, "ess_per_s": float(ess) / seconds,
            "leaves": float(np.mean(np.asarray(leaves)[burn_in:])),
            "test_mse_end": float(np.mean(np.asarray(test_mse)[burn_in:])),
            "first_good": int(hit[0]) if hit.size else None}


def ours_chain(dim: int, seed: int, sampler: str, n_iter: int, burn_in: int) -> dict:
    r = chain(dim, seed, sampler, n_iter, burn_in, traces=True)
    return _summary("ours", dim, seed, sampler, r["trace_loglik"], r["trace_leaves"],
                    r["trace_test_mse"], r["seconds"], burn_in)


def markdown(runs: list[dict], a: argparse.Namespace) -> str:
    lines = [f"# The authors' PG-BART code on our hypercube-D data sets ({a.out})", "",
             f"github.com/balajiln/pgbart at {COMMIT} (Python 2, converted by lib2to3), "
             f"seeds {a.first_seed}-{a.first_seed + a.seeds - 1}, {a.n_iter} iterations, ESS "
             f"of the log-likelihood over the iterations after {a.burn_in} (Geyer's initial "
             "monotone sequence on both codes' traces); C = 10, init_pg = empty. 'fit' = "
             f"a draw with test MSE < {GOOD_MSE} against the vertex values (the true tree's "
             "fit); seconds: the authors' per-iteration timer (pure Python) and our fit's "
             "wall time (numba). Generated by `python -m benchmarks.papers.pgbart_authors`.",
             "", "## Per chain", "",
             "| D | seed | code | sampler | ESS | leaves after burn-in | test MSE after burn-in "
             "| first iteration with a fit | seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        first = "never" if r["first_good"] is None else str(r["first_good"])
        lines.append(f"| {r['D']} | {r['seed']} | {r['code']} | {r['sampler']} | "
                     f"{r['ess']:.1f} | {r['leaves']:.1f} / {2 ** r['D']} | "
                     f"{r['test_mse_end']:.3f} | {first} | {r['seconds']:.1f} |")
    lines += ["", "## Summary: median (min-max) over seeds", "",
              "| D | code | sampler | ESS | leaves | chains reaching the fit |",
              "|---|---|---|---|---|---|"]
    for d in a.dims:
        for code in ("authors", "ours"):
            for s in SAMPLERS:
                mine = [r for r in runs if r["D"] == d and r["code"] == code
                        and r["sampler"] == s]
                if mine:
                    reach = sum(r["first_good"] is not None for r in mine)
                    ess = spread([r["ess"] for r in mine], ".0f")
                    lines.append(f"| {d} | {code} | {s} | {ess} | "
                                 f"{statistics.median(r['leaves'] for r in mine):.1f} / "
                                 f"{2 ** d} | {reach} of {len(mine)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, required=True,
                   help="a checkout (or git directory) of github.com/balajiln/pgbart")
    p.add_argument("--dims", type=int, nargs="+", default=[4])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--n-iter", type=int, default=2000)
    p.add_argument("--burn-in", type=int, default=1000)
    p.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    p.add_argument("--out", default="pgbart_authors")
    a = p.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        src = prepare(a.source.resolve(), Path(tmp))
        for s in a.samplers:  # compile our kernels before any chain is timed
            chain(2, 0, s, 3, 1)
        for d in a.dims:
            for seed in range(a.first_seed, a.first_seed + a.seeds):
                for s in a.samplers:
                    for run in (authors_chain, ours_chain):
                        args = (src, Path(tmp), d, seed, s) if run is authors_chain else (
                            d, seed, s)
                        runs.append(run(*args, a.n_iter, a.burn_in))
                        r = runs[-1]
                        print(f"D={d} seed={seed} {r['code']} {s}: ESS {r['ess']:.1f}, leaves "
                              f"{r['leaves']:.1f}, first fit {r['first_good']}, "
                              f"{r['seconds']:.1f} s", flush=True)
    text = markdown(runs, a)
    save(a.out, text)
    (OUT / f"{a.out}.json").write_text(json.dumps({"commit": COMMIT, "args": {
        k: v for k, v in vars(a).items() if k != "source"}, "runs": runs}, indent=1) + "\n")
    return text


if __name__ == "__main__":
    main()
