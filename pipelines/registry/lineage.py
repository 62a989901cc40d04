"""What a model version was made from: its data files, their row counts and a content hash.

:func:`data_identity` lists the Parquet files of a dataset (a file, a directory with hive
partitions, a glob or a list; local or any fsspec URL), reads each file's footer for its row
count and hashes its bytes (sha256, streamed in blocks). The identity of a dataset is the
sha256 of its files' relative paths and hashes, so it changes when any file's content,
name or presence changes, and not when the dataset is copied elsewhere.
:func:`inputs_key` combines identities and options into the key of one retrain run
(:mod:`pipelines.registry.retrain` uses it to make a re-run with the same inputs a no-op).
:func:`shared_files` finds the files two datasets share (an evaluation on training rows).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import fsspec
import pyarrow.parquet as pq

__all__ = ["data_identity", "inputs_key", "shared_files"]

#: Bytes read at a time while hashing.
BLOCK = 1 << 22


def _files(path: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str, list[str]]:
    fs, root = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
    if fs.isdir(root):
        files = sorted(p for p in fs.find(root) if p.endswith(".parquet")
                       and not any(part.startswith((".", "_")) for part in
                                   p[len(root):].strip("/").split("/")))
    elif any(ch in root for ch in "*?["):
        files, root = sorted(fs.glob(root)), os.path.dirname(root.split("*")[0])
    elif fs.exists(root):
        files, root = [root], os.path.dirname(root)
    else:
        raise FileNotFoundError(f"no dataset at {path!r}: no such file or directory.")
    if not files:
        raise FileNotFoundError(f"no Parquet file (*.parquet) under {path!r}.")
    return fs, root, files


def _sha256(fs: Any, name: str) -> str:
    digest = hashlib.sha256()
    with fs.open(name, "rb") as f:
        while block := f.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def shared_files(path: str | os.PathLike[str], other: str | os.PathLike[str],
                 storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The Parquet files of dataset ``path`` that are also files of dataset ``other``: the
    same file, or a file of the same size and bytes (a copy). Only files of equal size are
    read (hashed); the same file is recognised by its path alone.

    Parameters
    ----------
    path, other : str or path-like
        Datasets as :func:`data_identity` takes them.
    storage_options : dict, optional

    Returns
    -------
    list of str
        Files of ``path`` (as listed), in order.

    Raises
    ------
    FileNotFoundError
        If either dataset has no Parquet file.

    Examples
    --------
    >>> import pandas as pd, tempfile, os, shutil
    >>> d = tempfile.mkdtemp(); os.mkdir(f"{d}/a"); os.mkdir(f"{d}/b")
    >>> pd.DataFrame({"x": [1, 2]}).to_parquet(f"{d}/a/p0.parquet")
    >>> pd.DataFrame({"x": [3, 4]}).to_parquet(f"{d}/b/p1.parquet")
    >>> _ = shutil.copy(f"{d}/a/p0.parquet", f"{d}/b/p0.parquet")
    >>> [os.path.basename(f) for f in shared_files(f"{d}/b", f"{d}/a")]
    ['p0.parquet']
    """
    fs, _, files = _files(os.fspath(path), storage_options)
    ofs, _, others = _files(os.fspath(other), storage_options)
    if fs.protocol == ofs.protocol and set(files) & set(others):
        same = set(files) & set(others)
        return [f for f in files if f in same]
    sizes: dict[int, list[str]] = {}
    for name in others:
        sizes.setdefault(int(ofs.size(name)), []).append(name)
    out, hashes = [], {}
    for name in files:
        candidates = sizes.get(int(fs.size(name)), [])
        if not candidates:
            continue
        digest = _sha256(fs, name)
        for c in candidates:
            if c not in hashes:
                hashes[c] = _sha256(ofs, c)
        if digest in (hashes[c] for c in candidates):
            out.append(name)
    return out


def data_identity(path: str | os.PathLike[str],
                  storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The files of a Parquet dataset, with their footer row counts and content hashes.

    Parameters
    ----------
    path : str or path-like
        A Parquet file, directory or glob; local or an fsspec URL.
    storage_options : dict, optional

    Returns
    -------
    dict
        ``path`` (as given), ``rows`` (sum of the footers' row counts), ``sha256`` (of the
        files' relative paths and hashes), ``files``: a list of ``{"path", "rows", "bytes",
        "sha256"}`` with paths relative to the dataset.

    Examples
    --------
    >>> import pandas as pd, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> pd.DataFrame({"x": [1, 2, 3]}).to_parquet(os.path.join(d, "part.0.parquet"))
    >>> ident = data_identity(d)
    >>> ident["rows"], [f["path"] for f in ident["files"]]
    (3, ['part.0.parquet'])
    """
    path = os.fspath(path)
    fs, root, files = _files(path, storage_options)
    entries = []
    for name in files:
        digest = hashlib.sha256()
        size = 0
        with fs.open(name, "rb") as f:
            rows = pq.ParquetFile(f).metadata.num_rows
            f.seek(0)
            while block := f.read(BLOCK):
                digest.update(block)
                size += len(block)
        rel = name[len(root):].lstrip("/") if root and name.startswith(root) else name
        entries.append({"path": rel, "rows": int(rows), "bytes": size,
                        "sha256": digest.hexdigest()})
    whole = hashlib.sha256(json.dumps([[e["path"], e["sha256"]] for e in entries]).encode())
    return {"path": path, "rows": sum(e["rows"] for e in entries),
            "sha256": whole.hexdigest(), "files": entries}


def inputs_key(identities: Sequence[Mapping[str, Any] | None], options: Mapping[str, Any]) -> str:
    """sha256 of datasets' content hashes and JSON-ready ``options``: the same inputs, the
    same key, wherever the data lives."""
    payload = {"data": [None if i is None else i["sha256"] for i in identities],
               "options": options}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
