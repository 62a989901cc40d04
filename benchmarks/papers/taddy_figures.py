"""The figures of the Taddy et al. (2015) items, drawn as the paper draws them (PNG, Agg)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ebf import TrunkPosterior, plot_split_posterior


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path.name


def score_boxes(ax, scores: dict[str, dict], ylabel: str) -> None:
    """One box per model of its fold (or repeat) scores, labelled with its % worse than best."""
    labels = list(scores)
    ax.boxplot([scores[k]["folds"] for k in labels])
    ax.set_xticks(range(1, len(labels) + 1),
                  [f"{k}\n{scores[k]['pct_worse']:+.1f}%" for k in labels], fontsize="small")
    ax.set_ylabel(ylabel)


def cv_figure(path: Path, scores: dict[str, dict], ylabel: str, title: str,
              response: np.ndarray | None = None, response_label: str = "") -> str:
    """The paper's Figs. 2, 3, 5 and 6: scores per model (and Fig. 3's response histogram)."""
    plt = _pyplot()
    if response is None:
        fig, ax = plt.subplots(figsize=(6.5, 4))
    else:
        fig, (left, ax) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [1, 2]})
        left.hist(response, bins=40, color="0.6")
        left.set_xlabel(response_label)
        left.set_ylabel("count")
    score_boxes(ax, scores, ylabel)
    ax.set_title(title, fontsize="medium")
    return _save(fig, path)


def mcycle_figure(path: Path, X: np.ndarray, y: np.ndarray, theta: np.ndarray,
                  grid: np.ndarray, fits: dict[str, np.ndarray]) -> str:
    """Fig. 1: the data (point size proportional to the weighted CART's weights), three fits."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.scatter(X[:, 0], y, s=12 * theta, color="0.55", alpha=0.7, label="data (size: weight)")
    styles = {"CART": ("C0", "-"), "weighted CART": ("C3", "--"), "BF": ("k", "-")}
    for label, fit in fits.items():
        color, ls = styles.get(label, (None, "-"))
        ax.plot(grid, fit, color=color, ls=ls, lw=1.8, label=label)
    ax.set_xlabel("time after impact (ms)")
    ax.set_ylabel("head acceleration (g)")
    ax.legend(fontsize="small")
    return _save(fig, path)


def trunk_figure(path: Path, post: TrunkPosterior, paths: list[str]) -> str:
    """Fig. 4: the sample trunk (left) and the posterior of the first split locations."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.axis("off")
    left.text(0, 1, post.sample_trunk.export_text(post.feature_names, decimals=2),
              family="monospace", fontsize=7, va="top")
    left.set_title(f"sample CART trunk (recurs in {post.sample_frequency:.0%} of "
                   f"{len(post.draws)} draws)", fontsize="medium")
    plot_split_posterior(post, paths, ax=right)
    return _save(fig, path)
