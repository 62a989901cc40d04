"""Progress of the library's jobs in a notebook or a script: a tqdm bar per phase.

The jobs of ``pipelines`` and the Dask estimators report progress through callbacks,
``progress(phase, done, total)`` (a fit, :func:`pipelines.train.train`) or
``progress(done, total)`` (a prediction). The command line draws them on stderr
(:mod:`pipelines.cli.progress`); :func:`phase_bars` draws them with ``tqdm.auto``: a widget
in Jupyter (with ipywidgets), a text bar elsewhere::

    from pipelines.progress import phase_bars

    bars = phase_bars()
    result = train("data/", "y", out="models/m", progress=bars)
    predict_to_parquet("models/m", "data/", "pred/", progress=bars.phase("predict"))
    bars.close()

``tqdm`` comes with the ``examples`` extra.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["PHASE_LABELS", "PhaseBars", "phase_bars", "phase_label"]

PHASE_LABELS = {
    "data": "writing the flight data as Parquet",
    "compile": "compiling kernels (first run only)",
    "warm-up": "loading the kernels on the workers",
    "summary": "reading partitions",
    "encode": "encoding partitions",
    "trunk": "growing the trunk",
    "route": "moving rows to branches",
    "branches": "fitting branches",
    "predict": "predicting partitions",
    "evaluate": "scoring partitions",
    "plot": "plotting the calibration",
}


def phase_label(phase: str) -> str:
    """``"SSF branches"`` -> ``"SSF: fitting sub-samples"``; unknown phases as they are."""
    prefix, _, base = phase.rpartition(" ")
    prefix = {"baseline": "SSF"}.get(prefix, prefix)
    label = PHASE_LABELS.get(base, base)
    if prefix == "SSF":
        label = label.replace("branches", "sub-samples")
    return f"{prefix}: {label}" if prefix else label


class PhaseBars:
    """``progress(phase, done, total)`` as one ``tqdm.auto`` bar per phase (see the module).

    Parameters
    ----------
    **tqdm_kwargs
        Passed to every bar (``file=``, ``leave=``, ``disable=``...).
    """

    def __init__(self, **tqdm_kwargs: Any) -> None:
        try:
            from tqdm.auto import tqdm
        except ImportError as exc:
            raise ImportError("progress bars need tqdm: pip install 'ebf[examples]' (or tqdm)"
                              ) from exc
        self._tqdm = tqdm
        self._kwargs = {"leave": True, **tqdm_kwargs}
        self._lock = threading.Lock()  # prediction progress arrives on the client's thread
        self._phase: str | None = None
        self._bar: Any = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        with self._lock:
            if phase != self._phase:
                self._close()
                self._phase = phase
                self._bar = self._tqdm(total=total if total > 0 else None,
                                       desc=phase_label(phase), **self._kwargs)
            if total > 0 and self._bar.total != total:
                self._bar.total = total  # a trunk level: leaves split of at most total
            self._bar.n = int(done)
            self._bar.refresh()

    def phase(self, name: str) -> Any:
        """``progress(done, total)`` of one named phase (a prediction's callback)."""
        return lambda done, total: self(name, done, total)

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._bar, self._phase = None, None

    def close(self) -> None:
        """Close the last bar."""
        with self._lock:
            self._close()


def phase_bars(**tqdm_kwargs: Any) -> PhaseBars:
    """A :class:`PhaseBars`: the progress callback for notebooks and scripts.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> bars = phase_bars(file=out)
    >>> for done in range(4):
    ...     bars("branches", done, 3)
    >>> bars.close()
    >>> "fitting branches" in out.getvalue() and "3/3" in out.getvalue()
    True
    """
    return PhaseBars(**tqdm_kwargs)
