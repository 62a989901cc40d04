"""Atomic output directories, local or fsspec, and the rules for replacing one.

Every directory ``ebf`` writes (a model, a Parquet dataset, predictions) is built by
:func:`atomic_dir` in a hidden temporary sibling and moved into place only when complete,
so the destination is either absent (or the previous version), or complete.

Which outputs may be replaced
-----------------------------
``overwrite=True`` replaces only a directory this tool wrote, of the same kind:

- a model: its ``manifest.json`` says ``"format": "ebf-model"`` (:mod:`ebf.artifact`);
- predictions or a dataset: its marker file :data:`MARKER` (``_ebf_output.json``: the kind,
  the ebf version, the time), which :func:`atomic_dir` writes into every directory it
  commits. Parquet readers (pyarrow, Dask, Spark) skip names starting with ``_``.

Single files (``ebf evaluate --json`` and ``--report``) follow the same rule: ``overwrite``
replaces only a file of the same kind that ebf wrote, which says so inside
(:data:`FILE_KINDS`; :func:`check_file_destination`).

Where nothing may be written
----------------------------
No output, directory or file, is written inside an ebf output directory: a model,
predictions, a dataset, figures, or a model registry (``ROOT/models/NAME``, marked by its
:data:`MARKER` of kind ``"registry"``; only the registry's own writers, which pass it as
``container``, write there). A write inside a temporary directory that this process is
building is part of that output, which was checked when it began (a model saved into a
registry version being published). :func:`check_location` applies this, the input overlaps
and the current-directory rule, without the replace rule, to outputs with rules of their own
(the demo's folder, a registry's root).

An empty directory may be replaced too (nothing is lost). Anything else (a foreign folder,
a file, a link, another kind) is refused, naming the path and why, before any work starts.
:func:`check_destination` also refuses an output that is, contains or lies inside an input
(the data being read, the model being used) and, on a local file system, the current
directory or one of its parents.

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

import datetime
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

__all__ = [
    "FILE_KINDS",
    "KINDS",
    "MARKER",
    "STALE_SECONDS",
    "UnsafeOutputError",
    "atomic_dir",
    "check_destination",
    "check_file_destination",
    "check_location",
    "file_kind",
    "mark_output",
    "output_kind",
    "remove_abandoned",
]

from .places import Place as _Place
from .places import fsync as _fsync
from .places import host_name as _host
from .places import pid_alive as _pid_alive
from .versions import library_version

logger = logging.getLogger(__name__)

#: The marker file of a predictions or dataset directory (models have their manifest).
MARKER = "_ebf_output.json"
_MARKER_FORMAT = "ebf-output"
_MODEL_MANIFEST = "manifest.json"
_MODEL_FORMAT = "ebf-model"
#: What an output directory holds; ``overwrite`` replaces a directory of the same kind only.
#: A registry is never replaced; its marker tells every writer to keep out.
KINDS = ("model", "predictions", "dataset", "figures", "registry")
#: Single files ebf writes, and the mark each carries: an evaluation's JSON has the top-level
#: entry ``"ebf_output": "evaluation"``, a report the tag :data:`REPORT_TAG` in its head.
FILE_KINDS = ("evaluation", "report")
#: The tag that marks an HTML report (``pipelines.report``).
REPORT_TAG = b'<meta name="ebf-output" content="report">'
_FILE_HEAD_BYTES = 4096  # where a report's tag is; a JSON file is read whole up to 16 MB
_FILE_JSON_BYTES = 16 << 20
#: Temporary siblings older than this (seconds) are stale whoever made them: two days,
#: far beyond any single write, for hosts and object stores where no pid can be checked.
STALE_SECONDS = 2 * 24 * 3600

_TEMP = re.compile(
    r"\.(?P<what>tmp|old)-(?P<host>[A-Za-z0-9._]+)-(?P<pid>[0-9]+)-(?P<stamp>[0-9]+)"
    r"-[0-9a-f]+", re.ASCII,
)

_lock = threading.Lock()
_active: set[tuple[str, str]] = set()  # (protocol, path) of this process's temporary dirs
_abandoned: dict[tuple[str, str], _Place] = {}  # removed on failure, maybe re-created since


class UnsafeOutputError(ValueError):
    """An output path that overlaps an input, or the current directory or a parent of it."""


def _fsync_tree(root: str) -> None:
    """Flush every file and directory under ``root`` (written by any process) to disk."""
    for folder, _, files in os.walk(root, topdown=False):
        for name in files:
            _fsync(os.path.join(folder, name), directory=False)
        _fsync(folder, directory=True)


# ----------------------------------------------------------------------------- replace rules


def output_kind(url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None
                ) -> str | None:
    """What an ``ebf`` output directory holds: one of :data:`KINDS`, or None.

    Parameters
    ----------
    url : str or path-like
        A local path or fsspec URL.
    storage_options : dict, optional
        fsspec options for a URL.

    Returns
    -------
    str or None
        ``"model"`` for a directory whose ``manifest.json`` has ``"format": "ebf-model"``;
        the kind in its :data:`MARKER` file for predictions and datasets; None for anything
        else (absent, a file, a link, a directory ``ebf`` did not write).

    Examples
    --------
    >>> import tempfile
    >>> output_kind(tempfile.mkdtemp()) is None
    True
    """
    return _kind(_Place.of(url, storage_options))


def _kind(place: _Place) -> str | None:
    if place.is_link() or not place.isdir():
        return None
    manifest = place.read_json(_MODEL_MANIFEST)
    if isinstance(manifest, dict) and manifest.get("format") == _MODEL_FORMAT:
        return "model"
    marker = place.read_json(MARKER)
    if (isinstance(marker, dict) and marker.get("format") == _MARKER_FORMAT
            and marker.get("kind") in KINDS):
        return str(marker["kind"])
    return None


def _check_replaceable(place: _Place, kind: str, overwrite: bool) -> None:
    """Raise ``FileExistsError`` unless ``place`` is absent or may be replaced by ``kind``."""
    if not place.lexists():
        return
    if not overwrite:
        raise FileExistsError(
            errno.EEXIST, "the output already exists; pass overwrite=True (CLI: --overwrite) to "
            "replace it, or choose another output", place.url,
        )
    found = _kind(place)
    if found == kind or (found is None and not place.is_link() and place.isdir()
                         and not place.listdir()):  # an empty directory: nothing to lose
        return
    if place.is_link():
        why = "it is a symbolic link"
    elif not place.isdir():
        why = f"it is a file, not a {kind} directory"
    elif found is None:
        proof = (f"no {_MODEL_MANIFEST} of format {_MODEL_FORMAT!r}" if kind == "model"
                 else f"no {MARKER} marker")
        why = f"it is not a {kind} directory written by ebf ({proof})"
    else:
        why = f"it holds an ebf {found}, not {kind}"
    raise FileExistsError(
        errno.EEXIST, f"refusing to replace the output: {why}; --overwrite replaces only "
        f"ebf {kind} directories. Remove it yourself if it should go, or choose another output",
        place.url,
    )


def _roots(source: Any) -> list[str]:
    """The paths an input names (a path, a glob's fixed prefix, a list); none for data objects."""
    if isinstance(source, (list, tuple)):
        return [root for item in source for root in _roots(item)]
    if not isinstance(source, (str, os.PathLike)):
        return []
    text = os.fspath(source)
    magic = [text.find(ch) for ch in "*?[" if ch in text]
    if magic:
        text = text[: min(magic)].rsplit("/", 1)[0] or "/"
    return [text]


def _inside(path: str, root: str, sep: str) -> bool:
    return path == root or path.startswith(root.rstrip(sep) + sep)


def _check_overlaps(place: _Place, kind: str, inputs: Mapping[str, Any],
                    storage_options: Mapping[str, Any] | None) -> None:
    sep = os.sep if place.fs is None else "/"
    out = place.real()
    if place.fs is None:
        cwd = os.path.realpath(os.getcwd())
        if _inside(cwd, out, sep):
            where = "the current directory" if cwd == out else "a parent of the current directory"
            raise UnsafeOutputError(
                f"refusing to write {kind} to {place.url!r}: it is {where} ({cwd}); choose a new "
                "directory for the output"
            )
    for what, source in inputs.items():
        for root in _roots(source):
            other = _Place.of(root, storage_options)
            if other.protocol != place.protocol:
                continue
            path = other.real()
            if _inside(path, out, sep):
                relation = "is" if path == out else "contains"
            elif _inside(out, path, sep):
                relation = "is inside"
            else:
                continue
            raise UnsafeOutputError(
                f"refusing to write {kind} to {place.url!r}: it {relation} {what} ({root!r}); "
                "choose an output outside it"
            )


def _building(place: _Place) -> bool:
    """Whether ``place`` is a temporary directory an :func:`atomic_dir` of this process fills."""
    with _lock:
        active = list(_active)
    return any(protocol == place.protocol and (path == place.path or (
        place.fs is None and os.path.realpath(path) == place.path)) for protocol, path in active)


def _check_not_inside(place: _Place, what: str, container: _Place | None) -> None:
    """Refuse ``place`` if it lies inside an ebf output directory other than ``container``."""
    allowed = None if container is None else container.real()
    parent = _Place.of(os.path.realpath(place.parent().path), None) if place.fs is None \
        else place.parent()
    while parent.path not in ("", "/"):
        if _building(parent):  # part of a write in progress, checked when it began
            return
        found = _kind(parent)
        if found is not None and parent.real() != allowed:
            raise UnsafeOutputError(
                f"refusing to write {what} to {place.url!r}: it lies inside the ebf {found} "
                f"directory {parent.url!r}, which only ebf may change; choose a path outside it")
        up = parent.parent()
        if up.path == parent.path:
            break
        parent = up


def check_location(
    url: str | os.PathLike,
    what: str,
    *,
    inputs: Mapping[str, Any] | None = None,
    container: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Fail before any work if ``url`` is no place to write ``what``, whatever is there now.

    The rules of :func:`check_destination` except the replace rule: ``url`` may not overlap
    an input, be the current directory or a parent of it (local), or lie inside an ebf output
    directory (a model, predictions, a dataset, figures, a registry) other than ``container``.

    Parameters
    ----------
    url : str or path-like
        A local path or fsspec URL.
    what : str
        What is written, for messages (``"predictions"``, ``"the evaluation file"``).
    inputs : mapping of str to path, optional
        As for :func:`check_destination`.
    container : str, optional
        The URL of the one ebf output ``url`` may lie inside: a registry writing its versions.
    storage_options : dict, optional

    Raises
    ------
    UnsafeOutputError

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp(); mark_output(folder, "predictions")
    >>> check_location(os.path.join(folder, "x"), "a model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    basics.atomic.UnsafeOutputError: refusing to write a model to ...: it lies inside the ...
    """
    place = _Place.of(url, storage_options)
    _check_overlaps(place, what, inputs or {}, storage_options)
    _check_not_inside(place, what, None if container is None
                      else _Place.of(container, storage_options))


def check_destination(
    url: str | os.PathLike,
    kind: str,
    *,
    overwrite: bool = False,
    inputs: Mapping[str, Any] | None = None,
    container: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Fail before any work if ``kind`` may not be written to ``url``.

    Parameters
    ----------
    url : str or path-like
        The output directory (local path or fsspec URL).
    kind : {"model", "predictions", "dataset", "figures"}
    overwrite : bool, default=False
        Whether an existing output of the same kind may be replaced.
    inputs : mapping of str to path, optional
        What the job reads, by description (``{"the input data": "data/", "the model":
        "model/"}``); a path, glob or list of them (other values are ignored). The output may
        not be, contain or lie inside any of them.
    container : str, optional
        The ebf output ``url`` may lie inside (:func:`check_location`).
    storage_options : dict, optional
        fsspec options for URLs.

    Raises
    ------
    FileExistsError
        If ``url`` exists and ``overwrite`` is False, or it is not an ``ebf`` output of this
        kind (see the module docstring).
    UnsafeOutputError
        (a ``ValueError``) if ``url`` overlaps an input, is the current directory or one of
        its parents, or lies inside an ebf output directory.

    Examples
    --------
    >>> import os, tempfile
    >>> parent = tempfile.mkdtemp()
    >>> check_destination(os.path.join(parent, "new"), "predictions")  # absent: fine
    >>> open(os.path.join(parent, "notes.txt"), "w").close()  # not an empty directory now
    >>> check_destination(parent, "predictions", overwrite=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    FileExistsError: [Errno 17] refusing to replace the output: it is not a predictions ...
    """
    if kind not in KINDS or kind == "registry":
        raise ValueError(f"kind must be one of {KINDS[:-1]}, got {kind!r}")
    check_location(url, kind, inputs=inputs, container=container,
                   storage_options=storage_options)
    _check_replaceable(_Place.of(url, storage_options), kind, overwrite)


def _write_marker(place: _Place, kind: str) -> None:
    place.write_json(MARKER, {
        "format": _MARKER_FORMAT, "kind": kind, "ebf_version": library_version(),
        "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    })


def mark_output(url: str | os.PathLike, kind: str,
                storage_options: Mapping[str, Any] | None = None) -> None:
    """Mark an existing directory as an ebf output of ``kind`` (its :data:`MARKER` file), for
    outputs filled file by file (a report's figures, a registry) rather than by
    :func:`atomic_dir`.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp(); mark_output(folder, "figures"); output_kind(folder)
    'figures'
    """
    if kind not in KINDS or kind == "model":
        raise ValueError(f"kind must be one of {KINDS[1:]}, got {kind!r}")
    if output_kind(url, storage_options) != kind:
        _write_marker(_Place.of(url, storage_options), kind)


def file_kind(path: str | os.PathLike) -> str | None:
    """What single ebf output file ``path`` is: one of :data:`FILE_KINDS`, or None.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "r.json")
    >>> _ = open(path, "w").write('{"ebf_output": "evaluation"}')
    >>> file_kind(path), file_kind(os.path.dirname(path))
    ('evaluation', None)
    """
    path = os.fspath(path)
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        data = f.read(_FILE_JSON_BYTES + 1)
    if REPORT_TAG in data[:_FILE_HEAD_BYTES]:
        return "report"
    if len(data) <= _FILE_JSON_BYTES:
        try:
            obj = json.loads(data)
        except ValueError:
            return None
        if isinstance(obj, dict) and obj.get("ebf_output") in FILE_KINDS:
            return str(obj["ebf_output"])
    return None


def check_file_destination(path: str | os.PathLike, kind: str, *, overwrite: bool = False,
                           inputs: Mapping[str, Any] | None = None) -> None:
    """Fail before any work if a single file of ``kind`` may not be written to ``path``.

    Parameters
    ----------
    path : str or path-like
        A local file.
    kind : {"evaluation", "report"}
    overwrite : bool, default=False
        Whether an existing ebf file of the same kind may be replaced.
    inputs : mapping of str to path, optional
        What the job reads (as for :func:`check_destination`): the file may not be, or lie
        inside, any of them.

    Raises
    ------
    UnsafeOutputError
        If ``path`` lies inside an ebf output directory (a model, predictions, a dataset,
        figures, a registry), or is, or lies inside, an input.
    FileExistsError
        If ``path`` exists and ``overwrite`` is False, or it is not an ebf file of ``kind``.

    Examples
    --------
    >>> import os, tempfile
    >>> check_file_destination(os.path.join(tempfile.mkdtemp(), "r.json"), "evaluation")
    """
    if kind not in FILE_KINDS:
        raise ValueError(f"kind must be one of {FILE_KINDS}, got {kind!r}")
    if _Place.of(path, None).fs is not None:
        raise UnsafeOutputError(f"the {kind} file {os.fspath(path)!r} must be a local path")
    place = _Place.of(os.path.abspath(os.fspath(path)), None)
    check_location(place.path, f"the {kind} file", inputs=inputs)
    if not place.lexists():
        return
    if not overwrite:
        raise FileExistsError(
            errno.EEXIST, f"the {kind} file already exists; pass --overwrite to replace it, or "
            "choose another path", place.url)
    if place.is_link() or place.isdir() or file_kind(place.path) != kind:
        what = ("a symbolic link" if place.is_link() else "a directory" if place.isdir()
                else f"not an ebf {kind} file")
        raise FileExistsError(
            errno.EEXIST, f"refusing to replace it: it is {what}; --overwrite replaces only "
            f"ebf {kind} files. Remove it yourself if it should go, or choose another path",
            place.url)


# ----------------------------------------------------------------------------- temporary names


def _temp_name(name: str, what: str) -> str:
    return f".{name}.{what}-{_host()}-{os.getpid()}-{int(time.time())}-{secrets.token_hex(4)}"


def _is_stale(parent: _Place, entry: str, match: re.Match) -> bool:
    if parent.fs is None and os.name != "nt" and match["host"] == _host():
        pid = int(match["pid"])
        if pid == os.getpid():
            with _lock:
                return (parent.protocol, os.path.join(parent.path, entry)) not in _active
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


# ----------------------------------------------------------------------------- the writer


def _move(tmp: _Place, target: _Place) -> None:
    """Move the finished ``tmp`` to ``target``; an existing target is swapped out."""
    if target.fs is not None:
        if target.lexists():
            target.fs.rm(target.path, recursive=True)
        target.fs.mv(tmp.path, target.path, recursive=True)
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

    Checks the destination first (:func:`check_destination`), removes what killed writers
    to the same destination left behind, then yields an empty temporary directory. When the
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
        Paths the output must stay clear of (see :func:`check_destination`).
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
        As :func:`check_destination`, before anything is written.

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out")
    >>> with atomic_dir(target, "dataset") as tmp:
    ...     with open(os.path.join(tmp, "a.txt"), "w") as f:
    ...         _ = f.write("hello")
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
    _check_replaceable(target, kind, overwrite)  # again: the sweep may have put one back
    tmp = parent.child(_temp_name(target.name, "tmp"))
    moving = False
    with _lock:
        _active.add(tmp.key)
    try:
        try:  # a signal right after the mkdir must remove the directory too
            if target.fs is None:
                os.mkdir(tmp.path)  # not tempfile.mkdtemp: mode 0o700 would survive the rename
            else:
                target.fs.makedirs(tmp.path, exist_ok=False)
            logger.debug("writing %s through %s", target.url, tmp.url)
            yield tmp.url
            if kind != "model":
                _write_marker(tmp, kind)
            _check_replaceable(target, kind, overwrite)  # again: it may have appeared meanwhile
            moving = True
            _move(tmp, target)
        except BaseException:
            if moving and target.fs is not None:  # the temporary prefix is the complete copy
                logger.error("moving %s to %s failed; the complete copy is kept", tmp.url,
                             target.url)
            else:  # a local rename fails as a whole: the target is untouched or put back
                tmp.remove()
                with _lock:
                    _abandoned[tmp.key] = tmp
            raise
    finally:
        with _lock:
            _active.discard(tmp.key)
    logger.info("wrote %s", target.url)
