"""Numba flags of the kernels in ``basics`` (the mixture kernels of :mod:`basics.mixture`)."""

from __future__ import annotations

#: Flags for every numba kernel: compiled once per machine, GIL released so that threads
#: over row blocks run in parallel. No fastmath: the kernels sum in a fixed sequential order,
#: which is what makes a row's result independent of the rows and padding around it.
JIT = dict(cache=True, nogil=True)
