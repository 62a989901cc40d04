"""The numba flags of every kernel of the project (``basics``, ``mondrian``, ``ebf``).

All kernels are plain functions over arrays compiled with ``njit(**JIT)``; no jitclass
(it does not pickle, so it would break Dask).
"""

from __future__ import annotations

__all__ = ["JIT"]

#: Flags for every numba kernel: compiled once per machine (``cache``), GIL released so that
#: ``n_jobs`` threads over trees or row blocks run in parallel (``nogil``). No fastmath: the
#: kernels sum in a fixed sequential order, which is what makes a row's result independent
#: of the rows and padding around it (prediction kernels that may reassociate add their own
#: flags on top, e.g. ``mondrian._config.PREDICT_JIT``).
JIT = dict(cache=True, nogil=True)
