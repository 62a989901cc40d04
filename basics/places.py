"""Places: paths on the local file system or on any fsspec file system, handled alike.

:class:`Place` is what :mod:`basics.atomic` moves directories with and what the model
registry (:mod:`pipelines.registry`) reads and writes through: a local path (``fs`` None,
plain :mod:`os` calls, so renames are atomic and files can be flushed) or a path on an
fsspec file system (S3, GCS, Azure, ``memory://``...). Besides listing and removing, it
reads a small file within a size limit (:func:`read_limited`: the file is untrusted input);
:func:`basics.atomic.replace_file` replaces one atomically.

This module imports :mod:`fsspec` only for URLs, and never dask.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import shutil
import socket
import stat
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["Place", "fsync", "host_name", "pid_alive", "read_limited"]

logger = logging.getLogger(__name__)

_REMOVE_ATTEMPTS = 20  # x 0.1 s: late writers (tasks still finishing) may add files meanwhile


def host_name() -> str:
    """This host's name as it appears in temporary names (letters, digits, dots, ``_``)."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:40] or "host"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class Place:
    """A path on the local file system (``fs`` None) or on an fsspec file system."""

    def __init__(self, fs: Any, protocol: str, path: str) -> None:
        self.fs, self.protocol, self.path = fs, protocol, path
        self.url = path if fs is None else fs.unstrip_protocol(path)

    @classmethod
    def of(cls, url: str | os.PathLike, storage_options: Mapping[str, Any] | None) -> Place:
        text = os.fspath(url)
        if "://" not in text or text.startswith("file://"):
            return cls(None, "file", os.path.abspath(text.removeprefix("file://")))
        import fsspec

        fs, path = fsspec.core.url_to_fs(text, **dict(storage_options or {}))
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        return cls(fs, protocol, path.rstrip("/") or path)

    def _join(self) -> Any:
        return os.path if self.fs is None else posixpath

    def child(self, name: str) -> Place:
        return Place(self.fs, self.protocol, self._join().join(self.path, name))

    def parent(self) -> Place:
        return Place(self.fs, self.protocol, self._join().dirname(self.path) or "/")

    @property
    def name(self) -> str:
        return self._join().basename(self.path)

    @property
    def key(self) -> tuple[str, str]:
        return self.protocol, self.path

    def real(self) -> str:
        """The path with links resolved (local), for overlap checks."""
        return os.path.realpath(self.path) if self.fs is None else self.path

    def lexists(self) -> bool:
        return os.path.lexists(self.path) if self.fs is None else self.fs.exists(self.path)

    def is_link(self) -> bool:
        return self.fs is None and os.path.islink(self.path)

    def isdir(self) -> bool:
        return os.path.isdir(self.path) if self.fs is None else self.fs.isdir(self.path)

    def read_json(self, name: str) -> Any:
        """The JSON object in file ``name`` of this directory, or None if absent or invalid."""
        path = self.child(name).path
        try:
            if self.fs is None:
                if not os.path.isfile(path):  # a FIFO would block the open
                    return None
                with open(path, "rb") as f:
                    data = f.read()
            else:
                data = self.fs.cat_file(path)
            return json.loads(data)
        except (OSError, ValueError):
            return None

    def write_json(self, name: str, obj: Any) -> None:
        data = json.dumps(obj, indent=1).encode()
        path = self.child(name).path
        if self.fs is None:
            with open(path, "xb") as f:
                f.write(data)
        else:
            self.fs.pipe_file(path, data)

    def listdir(self) -> list[str]:
        if self.fs is None:
            return os.listdir(self.path)
        return [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(self.path, detail=False)]

    def remove(self) -> None:
        """Remove this tree, retrying while late writers still add files (best effort)."""
        for attempt in range(_REMOVE_ATTEMPTS):
            try:
                if self.fs is None:
                    shutil.rmtree(self.path)
                elif self.fs.exists(self.path):
                    self.fs.rm(self.path, recursive=True)
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if attempt == _REMOVE_ATTEMPTS - 1:
                    logger.warning("could not remove %s: %s",
                                   self.url, exc)
                    return
                time.sleep(0.1)


def fsync(path: str, directory: bool) -> None:
    """Flush the file (or, ``directory=True``, the directory entries) at ``path`` to disk."""
    if directory and os.name == "nt":  # Windows cannot open a directory for this
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_limited(place: Place, limit: int) -> bytes:
    """The bytes of the regular file at ``place``, refusing anything larger than ``limit``.

    Parameters
    ----------
    place : Place
    limit : int
        Largest accepted size in bytes.

    Returns
    -------
    bytes

    Raises
    ------
    FileNotFoundError
        If nothing is there.
    ValueError
        If it is not a regular file (a directory, a link, a FIFO) or holds more than
        ``limit`` bytes; the message names the path, the size and the limit.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.json")
    >>> with open(path, "w") as f:
    ...     _ = f.write("[1, 2]")
    >>> read_limited(Place.of(path, None), 100)
    b'[1, 2]'
    """
    if place.fs is None:
        info = os.lstat(place.path)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{place.url} is not a regular file (a link, a directory or a "
                             "device); replace it with the file this tool writes")
        size = info.st_size
    else:
        info = place.fs.info(place.path)
        if info.get("type") != "file":
            raise ValueError(f"{place.url} is not a file; replace it with the file this tool "
                             "writes")
        size = int(info.get("size") or 0)
    if size > limit:
        raise ValueError(f"{place.url} holds {size:,} bytes, more than the {limit:,} accepted; "
                         "it was not written by this tool: remove or replace it")
    if place.fs is None:
        with open(place.path, "rb") as f:
            data = f.read(limit + 1)
    else:
        data = place.fs.cat_file(place.path, start=0, end=limit + 1)
    if len(data) > limit:  # grew since the size was read
        raise ValueError(f"{place.url} holds more than the {limit:,} accepted bytes; it was "
                         "not written by this tool: remove or replace it")
    return data
