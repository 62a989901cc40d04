"""Where ``ebf`` may write: the output policy of every command, for directories and files.

Which outputs may be replaced
-----------------------------
``overwrite=True`` replaces only a directory this tool wrote, of the same kind:

- a model: its ``manifest.json`` says ``"format": "ebf-model"`` (:mod:`ebf.artifact`);
- predictions or a dataset: its marker file :data:`MARKER` (``_ebf_output.json``: the kind,
  the ebf version, the time), which :func:`atomic_dir` writes into every directory it
  commits. Parquet readers (pyarrow, Dask, Spark) skip names starting with ``_``.

Single files (``ebf evaluate --json`` and ``--report``, ``ebf cluster k8s --out``) follow the
same rule: ``overwrite`` replaces only a file of the same kind that ebf wrote, which says so
inside (:data:`FILE_KINDS`; :func:`check_file_destination`).

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

The temporary directories this process is filling (:mod:`basics.atomic`) are registered here
(:func:`begin_writing`, :func:`end_writing`): a write inside one is part of an output that
was checked when it began.

This module imports :mod:`fsspec` only for URLs, and never dask.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from .places import Place as _Place
from .versions import library_version

__all__ = [
    "FILE_KINDS",
    "KINDS",
    "MARKER",
    "REPORT_TAG",
    "SPEC_TAG",
    "UnsafeOutputError",
    "begin_writing",
    "check_destination",
    "check_file_destination",
    "check_location",
    "check_replaceable",
    "end_writing",
    "file_kind",
    "is_writing",
    "mark_output",
    "output_kind",
    "write_marker",
]

#: The marker file of a predictions or dataset directory (models have their manifest).
MARKER = "_ebf_output.json"
_MARKER_FORMAT = "ebf-output"
_MODEL_MANIFEST = "manifest.json"
_MODEL_FORMAT = "ebf-model"
#: What an output directory holds; ``overwrite`` replaces a directory of the same kind only.
#: A registry is never replaced; its marker tells every writer to keep out.
KINDS = ("model", "predictions", "dataset", "figures", "registry")
#: Single files ebf writes, and the mark each carries: an evaluation's JSON has the top-level
#: entry ``"ebf_output": "evaluation"``, a report the tag :data:`REPORT_TAG` in its head, a
#: cluster manifest (``cluster.kubernetes``) :data:`SPEC_TAG` as its first line.
FILE_KINDS = ("evaluation", "report", "cluster-spec")
#: The tag that marks an HTML report (``pipelines.report``).
REPORT_TAG = b'<meta name="ebf-output" content="report">'
#: The first line of a cluster manifest ebf writes (a YAML comment).
SPEC_TAG = b"# ebf-output: cluster-spec"
_FILE_HEAD_BYTES = 4096  # where a report's tag is; a JSON file is read whole up to 16 MB
_FILE_JSON_BYTES = 16 << 20

_lock = threading.Lock()
_writing: set[tuple[str, str]] = set()  # (protocol, path) of this process's temporary dirs


class UnsafeOutputError(ValueError):
    """An output path that overlaps an input, or the current directory or a parent of it."""


def begin_writing(key: tuple[str, str]) -> None:
    """Register the temporary directory ``key`` (``Place.key``) as being filled."""
    with _lock:
        _writing.add(key)


def end_writing(key: tuple[str, str]) -> None:
    with _lock:
        _writing.discard(key)


def is_writing(key: tuple[str, str]) -> bool:
    """Whether ``key`` is a temporary directory this process is filling."""
    with _lock:
        return key in _writing


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


def check_replaceable(place: _Place, kind: str, overwrite: bool) -> None:
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
    """Whether ``place`` is a temporary directory an ``atomic_dir`` of this process fills."""
    with _lock:
        active = list(_writing)
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
    directory (a model, predictions, a dataset, figures, a registry) other than ``container``;
    on an object store (:data:`BUCKET_STORES`) its bucket must exist (ebf never makes one).

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
    basics.locations.UnsafeOutputError: refusing to write a model to ...: it lies inside the ...
    """
    place = _Place.of(url, storage_options)
    _check_overlaps(place, what, inputs or {}, storage_options)
    _check_not_inside(place, what, None if container is None
                      else _Place.of(container, storage_options))
    _check_parent(place, what)


#: Object stores whose URLs start with a bucket (S3, GCS, Azure): writing a file would make
#: the bucket, with the store's defaults, so an output's bucket must exist already.
BUCKET_STORES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az"})


def _check_bucket(place: _Place, what: str) -> None:
    """An object-store output's bucket exists: a typo in it fails here, before any work,
    instead of making a bucket (fsspec's makedirs does, with the store's defaults)."""
    bucket = place.path.split("/", 1)[0]
    if place.protocol not in BUCKET_STORES or not bucket or place.fs.exists(bucket):
        return
    raise UnsafeOutputError(
        f"cannot write {what} to {place.url!r}: the bucket {bucket!r} does not exist (or "
        f"these credentials cannot see it), and ebf never creates buckets; create it first "
        f"(e.g. aws s3 mb {place.protocol}://{bucket}) or fix the name")


def _check_parent(place: _Place, what: str) -> None:
    """A local output's nearest existing ancestor is a folder this process may write in
    (where the output's missing parent folders and its temporary folder are made); an object
    store's bucket exists."""
    if place.fs is not None:  # object stores have no folders to be in the way
        _check_bucket(place, what)
        return
    ancestor = os.path.dirname(place.path)
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise UnsafeOutputError(
            f"cannot write {what} to {place.url!r}: {ancestor!r} is a file, not a folder; "
            "choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UnsafeOutputError(
            f"cannot write {what} to {place.url!r}: the folder {ancestor!r} is not writable; "
            "fix its permissions or choose another path")


def check_destination(
    url: str | os.PathLike,
    kind: str,
    *,
    overwrite: bool = False,
    inputs: Mapping[str, Any] | None = None,
    container: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    what: str | None = None,
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
    what : str, optional
        What is written, for messages (default ``kind``; a command names its option:
        ``"--baseline-out (a model)"``).

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
    check_location(url, what or kind, inputs=inputs, container=container,
                   storage_options=storage_options)
    check_replaceable(_Place.of(url, storage_options), kind, overwrite)


def write_marker(place: _Place, kind: str) -> None:
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
        write_marker(_Place.of(url, storage_options), kind)


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
    if data.startswith(SPEC_TAG + b"\n"):
        return "cluster-spec"
    if len(data) <= _FILE_JSON_BYTES:
        try:
            obj = json.loads(data)
        except ValueError:
            return None
        if isinstance(obj, dict) and obj.get("ebf_output") in FILE_KINDS:
            return str(obj["ebf_output"])
    return None


def check_file_destination(path: str | os.PathLike, kind: str, *, overwrite: bool = False,
                           inputs: Mapping[str, Any] | None = None,
                           what: str | None = None) -> None:
    """Fail before any work if a single file of ``kind`` may not be written to ``path``.

    Parameters
    ----------
    path : str or path-like
        A local file.
    kind : {"evaluation", "report", "cluster-spec"}
    overwrite : bool, default=False
        Whether an existing ebf file of the same kind may be replaced.
    inputs : mapping of str to path, optional
        What the job reads (as for :func:`check_destination`): the file may not be, or lie
        inside, any of them.
    what : str, optional
        What is written, for messages (default ``"the KIND file"``).

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
    check_location(place.path, what or f"the {kind} file", inputs=inputs)
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
