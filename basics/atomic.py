"""Atomic writes, local or fsspec: output directories and single files.

Every directory ``ebf`` writes (a model, a Parquet dataset, predictions) is built by
:func:`atomic_dir` in a hidden temporary sibling and moved into place only when complete,
so the destination is either absent (or the previous version), or complete; which outputs
may be written where and replaced is :mod:`basics.locations`'s. Every single file is
written by :func:`replace_file` (bytes; :func:`write_text` and :func:`write_json` on top),
to a hidden temporary sibling first, then moved over the destination in one step.

Temporary names and clean-up
----------------------------
The temporary directory is ``.<name>.tmp-<host>-<pid>-<unix time>-<random>`` next to the
destination (same file system, so the final move is a rename); an overwrite renames the old
directory aside to ``.<name>.old-<host>-<pid>-...`` first. A failure or an exception (the
CLI turns SIGTERM into one) removes the temporary directory. What a killed process left
behind is removed by the next :func:`atomic_dir` to the same destination: siblings of this
host whose process is gone, and any older than :data:`STALE_SECONDS` (other hosts, object
stores). An aside whose destination is missing (killed between the two renames) is put back.

- Local file systems: every file is fsync'ed before the rename, the parent after it; the
  move is one ``rename`` of a directory, atomic on POSIX. An overwrite swaps: a reader sees
  the old directory, briefly nothing, or the new one.
- Object stores (S3, GCS, Azure, ``memory://``...) have no rename: the move copies each
  object then deletes the temporary ones. A failed write leaves nothing at the destination,
  but a reader listing it during the move can see part of the files, and a crash during the
  move can leave a partial destination (the temporary prefix then still holds the full
  copy). Concurrent writers to one destination are supported nowhere.

This module imports :mod:`fsspec` only for URLs, and never dask.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["STALE_SECONDS", "atomic_dir", "remove_abandoned", "replace_file", "replacing",
           "scratch_dir", "write_bytes",
           "write_json", "write_text"]

from .commit import committing
from .locations import (
    begin_writing,
    check_destination,
    check_replaceable,
    end_writing,
    is_writing,
    write_marker,
)
from .places import Place as _Place
from .places import fsync as _fsync
from .places import host_name as _host
from .places import pid_alive as _pid_alive

logger = logging.getLogger(__name__)

#: Temporary siblings older than this (seconds) are stale whoever made them: two days,
#: far beyond any single write, for hosts and object stores where no pid can be checked.
STALE_SECONDS = 2 * 24 * 3600

_TEMP = re.compile(
    r"\.(?P<what>tmp|old)-(?P<host>[A-Za-z0-9._]+)-(?P<pid>[0-9]+)-(?P<stamp>[0-9]+)"
    r"-[0-9a-f]+", re.ASCII,
)

_lock = threading.Lock()
_abandoned: dict[tuple[str, str], _Place] = {}  # removed on failure, maybe re-created since


def _fsync_tree(root: str) -> None:
    """Flush every file and directory under ``root`` (written by any process) to disk."""
    for folder, _, files in os.walk(root, topdown=False):
        for name in files:
            _fsync(os.path.join(folder, name), directory=False)
        _fsync(folder, directory=True)


# ----------------------------------------------------------------------------- temporary names


def _temp_name(name: str, what: str) -> str:
    return f".{name}.{what}-{_host()}-{os.getpid()}-{int(time.time())}-{secrets.token_hex(4)}"


def _is_final(place: _Place) -> bool:
    """Whether ``place`` is no temporary directory's: moving an output there commits it
    (:mod:`basics.commit`); inside a temporary directory it is part of a later output."""
    return not any(part.startswith(".") and _TEMP.search(part)
                   for part in place.path.replace("\\", "/").split("/"))


def _is_stale(parent: _Place, entry: str, match: re.Match) -> bool:
    if parent.fs is None and os.name != "nt" and match["host"] == _host():
        pid = int(match["pid"])
        if pid == os.getpid():
            return not is_writing((parent.protocol, os.path.join(parent.path, entry)))
        return not _pid_alive(pid)
    return time.time() - int(match["stamp"]) > STALE_SECONDS


def _sweep_stale(parent: _Place, target: _Place) -> None:
    """Remove what killed writers to ``target`` left next to it; put a lost original back."""
    prefix = f".{target.name}."
    try:
        entries = [e for e in parent.listdir() if e.startswith(prefix)]
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in sorted(entries):  # ".old-" before ".tmp-": restore first
        match = _TEMP.fullmatch(entry, len(prefix) - 1)
        if match is None or not _is_stale(parent, entry, match):
            continue
        stale = parent.child(entry)
        if match["what"] == "old" and parent.fs is None and not target.lexists():
            logger.warning("restoring %s from %s (a writer was killed while replacing it)",
                           target.url, stale.url)
            try:
                os.rename(stale.path, target.path)
            except OSError as exc:
                logger.warning("could not restore %s: %s", target.url, exc)
            continue
        logger.info("removing %s, left by a killed writer", stale.url)
        stale.remove()


def remove_abandoned() -> None:
    """Remove again the temporary directories this process gave up on.

    A failed or interrupted write removes its temporary directory at once, but Dask tasks
    still running may write into it afterwards. Call this once they are stopped (the CLI
    does, after closing the cluster).
    """
    with _lock:
        places = list(_abandoned.values())
        _abandoned.clear()
    for place in places:
        if place.lexists():
            place.remove()


# ----------------------------------------------------------------------------- single files


@contextmanager
def replacing(place: _Place) -> Iterator[Any]:
    """A binary file to write that replaces ``place`` atomically when the block ends.

    The bytes go to a hidden temporary sibling first, then replace the file in one step:
    ``os.replace`` locally (the file flushed before, the directory after), a move on fsspec
    file systems (on object stores a single object is replaced as a whole). If the block
    or anything before the replace fails, the temporary file is removed and ``place`` is
    untouched; a failure after it (flushing the directory) leaves the new content in place.
    A writer killed half-way leaves the temporary file, which the next :func:`atomic_dir`
    of its directory removes (model writers remove it themselves).

    Parameters
    ----------
    place : basics.places.Place

    Yields
    ------
    binary file object

    Examples
    --------
    >>> import os, tempfile
    >>> from basics.places import Place, read_limited
    >>> place = Place.of(os.path.join(tempfile.mkdtemp(), "big.bin"), None)
    >>> with replacing(place) as f:
    ...     _ = f.write(b"12"); _ = f.write(b"34")
    >>> read_limited(place, 10)
    b'1234'
    """
    parent = place.parent()
    tmp = parent.child(_temp_name(place.name, "tmp"))
    try:
        if place.fs is None:
            with open(tmp.path, "xb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            with committing(_is_final(place)):
                os.replace(tmp.path, place.path)
                _fsync(parent.path, directory=True)
        else:
            with place.fs.open(tmp.path, "wb") as f:
                yield f
            with committing(_is_final(place)):
                place.fs.mv(tmp.path, place.path)
                place.fs.invalidate_cache()
    except BaseException:
        try:
            if tmp.fs is None:
                os.unlink(tmp.path)
            elif tmp.fs.exists(tmp.path):
                tmp.fs.rm_file(tmp.path)
        except OSError:
            pass  # already moved, or never written
        raise


def replace_file(place: _Place, data: bytes) -> None:
    """Write ``data`` to ``place`` atomically (:func:`replacing`): readers see the old
    content or the new one.

    Parameters
    ----------
    place : basics.places.Place
    data : bytes

    Examples
    --------
    >>> import os, tempfile
    >>> from basics.places import Place, read_limited
    >>> place = Place.of(os.path.join(tempfile.mkdtemp(), "pointer.json"), None)
    >>> replace_file(place, b"1"); replace_file(place, b"2"); read_limited(place, 10)
    b'2'
    """
    with replacing(place) as f:
        f.write(data)


def _local(path: str | os.PathLike) -> _Place:
    """The place of a local file, its directory created if missing."""
    target = os.path.abspath(os.fspath(path))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    return _Place.of(target, None)


def write_bytes(path: str | os.PathLike, data: bytes) -> str:
    """:func:`replace_file` for a local path (its directory created if missing); returns
    ``path`` as a string."""
    replace_file(_local(path), data)
    return os.fspath(path)


def write_text(path: str | os.PathLike, text: str) -> str:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any, *, indent: int = 1,
               default: Any = None) -> str:
    """:func:`write_text` of ``json.dumps(obj, indent=indent, default=default)`` and a final
    newline: a reader (or a run killed half-way) sees the old file or the new one, whole.

    Examples
    --------
    >>> import json, os, tempfile
    >>> path = write_json(os.path.join(tempfile.mkdtemp(), "r.json"), {"a": 1})
    >>> json.load(open(path))
    {'a': 1}
    """
    return write_text(path, json.dumps(obj, indent=indent, default=default) + "\n")


# ----------------------------------------------------------------------------- directories


def _move(tmp: _Place, target: _Place) -> None:
    """Move the finished ``tmp`` to ``target``; an existing target is swapped out."""
    if target.fs is not None:
        if target.lexists():
            target.fs.rm(target.path, recursive=True)
        # file by file: a recursive ``mv`` of s3fs also tries to copy the "folders" of
        # nested keys (a model's shards/), which do not exist as objects
        target.fs.invalidate_cache()
        files = target.fs.find(tmp.path)
        target.fs.copy(files, [target.path + f[len(tmp.path):] for f in files])
        target.fs.rm(tmp.path, recursive=True)
        target.fs.invalidate_cache()
        return
    parent = target.parent().path
    _fsync_tree(tmp.path)
    if not target.lexists():
        try:
            os.rename(tmp.path, target.path)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):  # another writer won the race
                raise FileExistsError(
                    errno.EEXIST, "the output appeared while writing; nothing was replaced",
                    target.url,
                ) from exc
            raise
        _fsync(parent, directory=True)
        return
    aside = os.path.join(parent, _temp_name(target.name, "old"))
    os.rename(target.path, aside)
    try:
        os.rename(tmp.path, target.path)
    except BaseException:
        os.rename(aside, target.path)
        raise
    _fsync(parent, directory=True)
    shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def atomic_dir(
    url: str | os.PathLike,
    kind: str = "dataset",
    *,
    overwrite: bool = False,
    inputs: Mapping[str, Any] | None = None,
    container: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Iterator[str]:
    """Write a directory atomically: yield a temporary directory, move it to ``url`` at exit.

    Checks the destination first (:func:`basics.locations.check_destination`), removes what
    killed writers to the same destination left behind, then yields an empty temporary
    directory. When the
    ``with`` block ends normally, the :data:`MARKER` file is added (unless ``kind`` is
    ``"model"``: a model's manifest marks it), everything is flushed (local file systems) and
    the directory moved into place. If the block raises (or is interrupted), the temporary
    directory is removed and ``url`` is untouched. See the module docstring for object stores.

    Parameters
    ----------
    url : str or path-like
        Destination: a local path or an fsspec URL. Its parent is created if needed.
    kind : {"dataset", "predictions", "model"}, default="dataset"
        What the directory holds; an existing destination is replaced only if ``overwrite``
        and it holds the same kind.
    overwrite : bool, default=False
    inputs : mapping of str to path, optional
        Paths the output must stay clear of (see :func:`basics.locations.check_destination`).
    container : str, optional
        The ebf output the destination may lie inside (a registry publishing a version).
    storage_options : dict, optional
        fsspec options (credentials...) for a URL.

    Yields
    ------
    str
        The temporary directory (a local path, or a URL with the destination's protocol).
        Writers open ``<tmp>/<file>`` with the same ``storage_options``.

    Raises
    ------
    FileExistsError, UnsafeOutputError
        As :func:`basics.locations.check_destination`, before anything is written.

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out")
    >>> with atomic_dir(target, "dataset") as tmp:
    ...     with open(os.path.join(tmp, "a.txt"), "w") as f:
    ...         _ = f.write("hello")
    >>> from basics.locations import output_kind
    >>> sorted(os.listdir(target)), output_kind(target)
    (['_ebf_output.json', 'a.txt'], 'dataset')
    """
    check_destination(url, kind, overwrite=overwrite, inputs=inputs, container=container,
                      storage_options=storage_options)
    target = _Place.of(url, storage_options)
    parent = target.parent()
    if target.fs is None:
        os.makedirs(parent.path, exist_ok=True)
    else:
        target.fs.makedirs(parent.path, exist_ok=True)
    _sweep_stale(parent, target)
    check_replaceable(target, kind, overwrite)  # again: the sweep may have put one back
    tmp = parent.child(_temp_name(target.name, "tmp"))
    moving = False
    begin_writing(tmp.key)
    try:
        try:  # a signal right after the mkdir must remove the directory too
            if target.fs is None:
                os.mkdir(tmp.path)  # not tempfile.mkdtemp: mode 0o700 would survive the rename
            else:
                target.fs.makedirs(tmp.path, exist_ok=False)
            logger.debug("writing %s through %s", target.url, tmp.url)
            yield tmp.url
            if kind != "model":
                write_marker(tmp, kind)
            check_replaceable(target, kind, overwrite)  # again: it may have appeared meanwhile
            with committing(_is_final(target)):
                moving = True
                _move(tmp, target)
        except BaseException:
            if moving and target.fs is not None:  # the temporary prefix is the complete copy
                logger.error("moving %s to %s failed; the complete copy is kept", tmp.url,
                             target.url)
            else:  # a local rename fails as a whole: the target is untouched or put back
                with _lock:  # first: a signal cutting the removal short leaves it listed
                    _abandoned[tmp.key] = tmp
                tmp.remove()
            raise
    finally:
        end_writing(tmp.key)
    logger.info("wrote %s", target.url)


@contextmanager
def scratch_dir(parent: str | os.PathLike, name: str,
                storage_options: Mapping[str, Any] | None = None) -> Iterator[str]:
    """A hidden working directory ``.<name>.tmp-<host>-<pid>-...`` in ``parent``, removed
    when the block ends, whatever happens.

    For files a job builds before it knows where they go (a model staged, scored, then
    copied into the version that records it). Named and cleaned up like the temporaries of
    :func:`atomic_dir`: what killed processes left under the same ``name`` in ``parent``
    is removed first, and a directory given up while Dask tasks may still write to it is
    removed again by :func:`remove_abandoned`.

    Parameters
    ----------
    parent : str or path-like
        An existing directory, local or an fsspec URL.
    name : str
    storage_options : dict, optional

    Yields
    ------
    str
        The directory (a local path, or a URL with the parent's protocol).

    Examples
    --------
    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> with scratch_dir(root, "stage") as tmp:
    ...     os.path.basename(tmp).startswith(".stage.tmp-"), os.path.isdir(tmp)
    (True, True)
    >>> os.listdir(root)
    []
    """
    folder = _Place.of(parent, storage_options)
    _sweep_stale(folder, folder.child(name))
    tmp = folder.child(_temp_name(name, "tmp"))
    begin_writing(tmp.key)
    try:
        try:
            if tmp.fs is None:
                os.mkdir(tmp.path)
            else:
                tmp.fs.makedirs(tmp.path, exist_ok=False)
            yield tmp.url
        finally:
            with _lock:  # first: a signal cutting the removal short leaves it listed
                _abandoned[tmp.key] = tmp
            tmp.remove()
    finally:
        end_writing(tmp.key)
