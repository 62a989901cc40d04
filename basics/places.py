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

__all__ = ["MAX_JSON_DEPTH", "Place", "file_kind", "fsync", "host_name",
           "json_depth", "open_regular", "pid_alive", "read_json", "read_limited", "read_text"]

logger = logging.getLogger(__name__)

#: The largest file :meth:`Place.read_json` reads: a model's manifest (at most 64 MiB, its
#: format's limit) or an output's marker (a few hundred bytes).
MAX_MARKER_BYTES = 64 * 2**20

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
        """The JSON value in file ``name`` of this directory, or None if absent or invalid
        (read by :func:`read_json`: at most :data:`MAX_MARKER_BYTES`, not too deep)."""
        try:
            return read_json(self.child(name), MAX_MARKER_BYTES, follow_links=True)
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


#: The deepest nesting accepted in a JSON file read as untrusted input (:func:`read_json`):
#: what ebf writes nests a few levels; Python's parser recurses once per level.
MAX_JSON_DEPTH = 64

#: A JSON string literal (escapes included), removed before brackets are counted.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, for messages (``"a named pipe"``).

    Examples
    --------
    >>> import os, stat
    >>> file_kind(os.stat(".").st_mode), file_kind(stat.S_IFIFO)
    ('a directory', 'a named pipe')
    """
    for test, kind in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def open_regular(path: str | os.PathLike, *, follow_links: bool = False) -> Any:
    """``path`` opened for binary reading once it is known to be a regular file.

    Its type is checked before the open (a named pipe would block it, a device never end),
    and again on the open file, which must be the same file still (it may have been
    replaced meanwhile). Unless ``follow_links``, a symbolic link is refused too.

    Raises
    ------
    FileNotFoundError
        If nothing is there.
    ValueError
        Naming the path and what it is.
    """
    path = os.fspath(path)
    before = (os.stat if follow_links else os.lstat)(path)
    if not stat.S_ISREG(before.st_mode):
        raise ValueError(f"{path} is {file_kind(before.st_mode)}, not a regular file")
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (
                before.st_dev, before.st_ino):
            raise ValueError(f"{path} was replaced while it was opened")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_limited(place: Place, limit: int, *, follow_links: bool = False) -> bytes:
    """The bytes of the regular file at ``place``, refusing anything larger than ``limit``.

    Nothing but a regular file is opened (locally, a directory, named pipe, device or
    socket is refused from its ``stat``, so nothing blocks or reads without end), and no
    more than ``limit + 1`` bytes are read whatever the file claims.

    Parameters
    ----------
    place : Place
    limit : int
        Largest accepted size in bytes.
    follow_links : bool, default=False
        Whether a symbolic link is read as the file it points to (a file the user names)
        rather than refused (a file a tool wrote, which it never makes a link).

    Returns
    -------
    bytes

    Raises
    ------
    FileNotFoundError
        If nothing is there.
    ValueError
        If it is not a regular file or holds more than ``limit`` bytes; the message names
        the path and what it is, or its size and the limit (the caller adds the fix).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.json")
    >>> with open(path, "w") as f:
    ...     _ = f.write("[1, 2]")
    >>> read_limited(Place.of(path, None), 100)
    b'[1, 2]'
    >>> read_limited(Place.of(os.path.dirname(path), None), 100)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: ... is a directory, not a regular file
    """
    if place.fs is None:
        with open_regular(place.path, follow_links=follow_links) as f:
            size = os.fstat(f.fileno()).st_size
            data = b"" if size > limit else f.read(limit + 1)
    else:
        info = place.fs.info(place.path)
        if info.get("type") != "file":
            raise ValueError(f"{place.url} is a {info.get('type') or 'directory'}, not a "
                             "regular file")
        size = int(info.get("size") or 0)
        data = b"" if size > limit else place.fs.cat_file(place.path, start=0, end=limit + 1)
    if max(size, len(data)) > limit:  # the read catches a file that grew since its stat
        raise ValueError(f"{place.url} holds {max(size, len(data)):,} bytes: more than "
                         f"{limit:,} bytes, the most accepted")
    return data


def read_text(place: Place, limit: int, *, follow_links: bool = False) -> str:
    """The UTF-8 text of the regular file at ``place``, read by :func:`read_limited`.

    Raises
    ------
    FileNotFoundError
        If nothing is there.
    ValueError
        As :func:`read_limited`, or if the bytes are not UTF-8 (the message names the byte).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.bin")
    >>> _ = open(path, "wb").write(b"ok \\xff")
    >>> read_text(Place.of(path, None), 100)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: ... is not text (not UTF-8 at byte 3)
    """
    data = read_limited(place, limit, follow_links=follow_links)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{place.url} is not text (not UTF-8 at byte {exc.start})") from None


def json_depth(text: str | bytes) -> int:
    """How deep the arrays and objects of JSON ``text`` nest, counted without parsing it
    (brackets inside strings do not count): ``[[1], {"a": [2]}]`` is 3 deep.

    Examples
    --------
    >>> json_depth('[[1], {"a": [2]}]'), json_depth('{"[[[": 1}'), json_depth("7")
    (3, 1, 0)
    """
    import numpy as np

    data = text.encode() if isinstance(text, str) else text
    step = np.zeros(256, np.int32)  # +1 opens a level, -1 closes one
    step[[ord("["), ord("{")]], step[[ord("]"), ord("}")]] = 1, -1
    bare = np.frombuffer(_JSON_STRING.sub(b"", data), np.uint8)
    return int(np.cumsum(step[bare]).max(initial=0))


def read_json(place: Place, limit: int, *, max_depth: int = MAX_JSON_DEPTH,
              follow_links: bool = False) -> Any:
    """The JSON value in the (untrusted) regular file ``place``: at most ``limit`` bytes
    (:func:`read_limited`) of UTF-8, nested at most ``max_depth`` levels deep, both checked
    before it is parsed (a deeper file would exhaust the parser's recursion).

    Parameters
    ----------
    place : Place
    limit : int
        Largest accepted size in bytes.
    max_depth : int, default=MAX_JSON_DEPTH
    follow_links : bool, default=False
        As for :func:`read_limited`.

    Returns
    -------
    object

    Raises
    ------
    FileNotFoundError
        If nothing is there.
    ValueError
        If it is not a regular file, is larger than ``limit``, is not UTF-8, nests deeper
        than ``max_depth`` or is not JSON; the message names the path and the limit.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.json")
    >>> _ = open(path, "w").write("[" * 100 + "]" * 100)
    >>> read_json(Place.of(path, None), 1000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: ... nests 100 levels deep: more than 64 levels, the most accepted
    """
    text = read_text(place, limit, follow_links=follow_links)
    depth = json_depth(text)
    if depth > max_depth:
        raise ValueError(f"{place.url} nests {depth} levels deep: more than {max_depth} "
                         "levels, the most accepted")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{place.url} is not JSON ({exc})") from None
