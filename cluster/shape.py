"""What every cluster recipe shares: the shape of a worker, memory sizes, optional packages.

A branch is ``ebf``'s unit of fitting (Taddy et al. 2015, Sec. 4.2: the trunk is grown until a
branch's forest fits the memory of one machine). A worker runs one task per thread, so a
worker of ``threads`` threads may fit that many branches at once: its memory limit must hold
``threads x branch_memory`` below Dask's pause threshold (``distributed.worker.memory.pause``,
80 % of the limit by default), where the worker stops taking tasks.
:meth:`WorkerShape.check_branch_memory` says so before a cluster is asked for.

The recipes (:mod:`cluster.jobqueue`, :mod:`cluster.kubernetes`, :mod:`cluster.gateway`)
render one :class:`WorkerShape` each in their backend's terms: a job's cores, memory and
processes; a pod's resources and the ``dask worker`` arguments; a gateway's options.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from ebf.dask.branches import parse_branch_memory, pause_fraction

__all__ = ["CLUSTER_EXTRA", "WorkerShape", "memory_bytes", "memory_text", "optional_module"]

#: How to install the optional packages of the recipes.
CLUSTER_EXTRA = "pip install 'ebf[cluster]'"

#: Binary and decimal units, largest first: (bytes, Dask's suffix, Kubernetes' suffix).
_UNITS = ((2**40, "TiB", "Ti"), (10**12, "TB", "T"), (2**30, "GiB", "Gi"), (10**9, "GB", "G"),
          (2**20, "MiB", "Mi"), (10**6, "MB", "M"), (2**10, "KiB", "Ki"), (10**3, "kB", "k"))


def memory_bytes(value: int | str, name: str) -> int:
    """A memory size in bytes: an int, or text such as ``"4GiB"`` or ``"8GB"``.

    Parameters
    ----------
    value : int or str
    name : str
        The option's name, for the error message.

    Returns
    -------
    int

    Examples
    --------
    >>> memory_bytes("4GiB", "memory"), memory_bytes("1.5GB", "memory")
    (4294967296, 1500000000)
    """
    return int(parse_branch_memory(value, name))


def memory_text(n_bytes: int, style: str = "dask") -> str:
    """``n_bytes`` exactly, in the largest unit, binary or decimal, that divides it.

    Parameters
    ----------
    n_bytes : int
    style : {"dask", "kubernetes"}
        ``"4GiB"`` (Dask's ``parse_bytes`` reads it) or ``"4Gi"`` (a Kubernetes quantity).

    Returns
    -------
    str

    Examples
    --------
    >>> memory_text(4 * 2**30), memory_text(4 * 2**30, "kubernetes"), memory_text(3 * 10**9)
    ('4GiB', '4Gi', '3GB')
    >>> memory_text(6 * 10**9), memory_text(1234567, "kubernetes")
    ('6GB', '1234567')
    """
    if style not in ("dask", "kubernetes"):
        raise ValueError(f"style must be 'dask' or 'kubernetes', got {style!r}")
    for size, dask_suffix, k8s_suffix in _UNITS:
        if n_bytes >= size and n_bytes % size == 0:
            return f"{n_bytes // size}{dask_suffix if style == 'dask' else k8s_suffix}"
    return str(n_bytes)


@dataclass(frozen=True)
class WorkerShape:
    """One Dask worker process: its threads and its memory limit in bytes.

    Parameters
    ----------
    threads : int
        Threads of the worker (``dask worker --nthreads``): tasks it runs at once.
    memory : int
        Memory limit of the worker in bytes (``dask worker --memory-limit``).

    Examples
    --------
    >>> shape = WorkerShape.of(2, "8GiB")
    >>> shape.threads, shape.memory_limit
    (2, '8GiB')
    >>> shape.check_branch_memory("3GiB")
    >>> shape.check_branch_memory("4GiB")
    Traceback (most recent call last):
    ...
    ValueError: a worker of 2 threads with a memory limit of 8GiB fits 2 branches of 4GiB \
only above Dask's pause threshold (80% of the limit: 6.40 GiB): give each worker at least \
10GiB, at most 1 thread per worker, or pass a smaller --branch-memory / branch_memory (a trunk \
with more leaves makes smaller branches)
    """

    threads: int
    memory: int

    @classmethod
    def of(cls, threads: int, memory: int | str, *, threads_name: str = "threads",
           memory_name: str = "memory") -> WorkerShape:
        """Check and build a shape; the names are the caller's options, for the errors."""
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"{threads_name} must be a positive integer, got {threads!r}")
        return cls(threads, memory_bytes(memory, memory_name))

    @property
    def memory_limit(self) -> str:
        """The memory limit as ``dask worker --memory-limit`` takes it (``"4GiB"``)."""
        return memory_text(self.memory, "dask")

    def check_branch_memory(self, branch_memory: int | str | None,
                            workers_per_job: int | None = None) -> None:
        """Fail if ``threads`` branches of ``branch_memory`` do not fit below the pause
        threshold of the worker's memory limit (``None``: nothing to check).

        Parameters
        ----------
        branch_memory : int, str or None
        workers_per_job : int, optional
            The worker is one of this many processes sharing a batch job's cores and memory
            (dask-jobqueue): fewer threads per worker then means more workers of less memory
            each, which fits no larger branch, so the advice names the job's memory instead.

        Raises
        ------
        ValueError
            Naming the sizes and the ways out: more memory, fewer threads (with several:
            how many fit), smaller branches.
        """
        budget = parse_branch_memory(branch_memory)
        if budget is None:
            return
        from dask.utils import format_bytes

        pause = pause_fraction()
        if self.threads * budget <= pause * self.memory:
            return
        needed = -(-self.threads * budget // 2**30) * 2**30  # whole GiB, rounded up
        while self.threads * budget > pause * needed:
            needed += 2**30
        fewer, more = "", f"give each worker at least {memory_text(needed)}"
        if workers_per_job is not None:
            more = (f"give each job at least {memory_text(needed * workers_per_job)} (--memory:"
                    f" {memory_text(needed)} for each of its {workers_per_job} worker"
                    f"{'s' if workers_per_job > 1 else ''})")
        elif self.threads > 1:  # a worker of one thread has no fewer to run
            fits = int(pause * self.memory // budget)
            fewer = (f"at most {fits} thread{'s' if fits > 1 else ''} per worker, " if fits
                     else "")
        raise ValueError(
            f"a worker of {self.threads} thread{'s' if self.threads > 1 else ''} with a memory "
            f"limit of {self.memory_limit} fits {self.threads} branch"
            f"{'es' if self.threads > 1 else ''} of {memory_text(budget)} only above Dask's "
            f"pause threshold ({pause:.0%} of the limit: {format_bytes(pause * self.memory)}):"
            f" {more}, {fewer}or pass a smaller "
            "--branch-memory / branch_memory (a trunk with more leaves makes smaller branches)"
        )


def optional_module(module: str, package: str, what: str) -> ModuleType:
    """Import ``module`` of the optional ``package``, or fail naming the extra to install.

    Parameters
    ----------
    module : str
        The module to import (``"dask_jobqueue"``).
    package : str
        Its distribution on PyPI (``"dask-jobqueue"``).
    what : str
        What needs it (``"slurm_cluster"``), for the message.

    Returns
    -------
    module

    Raises
    ------
    ImportError
        ``<what> needs <package>: pip install 'ebf[cluster]' (or pip install <package>)``.

    Examples
    --------
    >>> optional_module("json", "json", "this example").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{what} needs {package}: {CLUSTER_EXTRA} (or pip install {package})"
        ) from exc
