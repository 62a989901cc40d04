"""A versioned model registry on any file system, with an atomically replaced pointer.

Layout, under a registry root (a local path or any fsspec URL)::

    ROOT/models/NAME/
      v0001/model/          a model saved by ebf.artifact.save (manifest.json, head.pack, shards/)
      v0001/version.json    its record: what the publisher gave (metrics, decision, lineage,
                            an input hash under "key"), plus version, name, created_utc and
                            model_hash (ebf.artifact.model_hash of v0001/model)
      v0002/...
      current.json          {"version": 2, "history": [1], "updated_utc": ...}
      .lock                 only while a writer holds the registry: {pid, host, started_utc, token}
      _ebf_output.json      the marker (kind "registry") that keeps every other ebf writer out

- A version appears whole or not at all: it is built in a hidden temporary sibling
  (:func:`basics.atomic.atomic_dir`) and moved into place; only directories holding their
  ``version.json`` count. Leftovers of killed writers are ignored, their numbers not reused.
- The pointer is replaced in one step (:func:`basics.atomic.replace_file`), only once the
  version it names is in place. A failed :meth:`Registry.publish` (at any step) leaves the
  versions and the pointer as they were.
- Every version records its model's hash; :meth:`Registry.verified_model` (what
  :func:`pipelines.registry.resolve.resolve_model`, promote, rollback and retrain use)
  refuses a model that does not match it, naming both hashes: a model directory replaced
  behind the registry's back is never served. Nothing else may write under a registry
  (:mod:`basics.atomic` knows it by its marker, which every writer lays down when it takes
  the lock).
- Writers exclude each other with a lock file (:class:`pipelines.registry.files.LockFile`);
  readers take no lock. Everything read is untrusted (bounded JSON objects, version numbers
  from ``vNNNN`` names only); nothing is pickled.

On object stores a move copies objects: a listing during a publish may show the new version
before all its model files are there (the pointer moves only afterwards). ``REGISTRY[@version]``
(:func:`pipelines.registry.resolve.resolve_model`) names a model wherever a model directory is
accepted.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from basics.atomic import atomic_dir, scratch_dir
from basics.locations import mark_output
from basics.places import Place

from .files import (
    LEFTOVER,
    LOCK_FILE,
    MAX_JSON_BYTES,
    MODEL_DIR,
    NAME,
    POINTER_FILE,
    RECORD_FILE,
    VERSION_DIR,
    LockFile,
    MissingVersionError,
    Pointer,
    RegistryBusyError,
    RegistryError,
    check_record,
    is_version_number,
    locate,
    now_utc,
    read_object,
    split_spec,
    version_name,
    version_of,
)

__all__ = [
    "MissingVersionError",
    "Registry",
    "RegistryBusyError",
    "RegistryError",
]

logger = logging.getLogger(__name__)

#: Largest record read back (bytes): a crafted file is refused, not parsed.
MAX_RECORD_BYTES = MAX_JSON_BYTES


class Registry:
    """The versions of one model ``NAME`` in a registry: ``ROOT/models/NAME/v0001/`` ...

    Parameters
    ----------
    root : str or path-like
        The registry root: a local path or any fsspec URL.
    name : str, default="ebf"
        The model's name: letters, digits, ``.``, ``_``, ``-`` (at most 100).
    storage_options : dict, optional
        fsspec options for a URL, passed to every read and write (also to ``write`` of
        :meth:`publish` through the URL it is given: use the same options there).

    Examples
    --------
    >>> import tempfile
    >>> from ebf import save
    >>> reg = Registry(tempfile.mkdtemp())
    >>> with reg.lock():  # doctest: +SKIP
    ...     v = reg.publish(lambda url: save(model, url), {"key": "abc"}, promote=True)
    >>> reg.versions(), reg.current(), reg.find("abc")  # doctest: +SKIP
    ([1], 1, 1)
    """

    def __init__(self, root: str | os.PathLike, name: str = "ebf",
                 storage_options: Mapping[str, Any] | None = None) -> None:
        if not isinstance(name, str) or NAME.fullmatch(name) is None:
            raise RegistryError(f"invalid model name {name!r} for the registry {root}: use "
                                "letters, digits, '.', '_' and '-' (at most 100, not starting "
                                "with '.', '_' or '-')")
        self.storage_options = dict(storage_options or {})
        top = Place.of(root, self.storage_options)
        self.root, self.name = top.url, name
        self._dir = top.child("models").child(name)
        self._lockfile = LockFile(self._dir.child(LOCK_FILE), self._dir.url)
        self._pointer = Pointer(self._dir.child(POINTER_FILE), self._dir.url)
        self._owner: int | None = None  # the thread holding the lock, through this object
        self._token: str | None = None

    def __repr__(self) -> str:
        return f"Registry({self.root!r}, name={self.name!r})"

    @property
    def url(self) -> str:
        """``ROOT/models/NAME``: the directory of the versions."""
        return self._dir.url

    # ------------------------------------------------------------------ reading

    def _entries(self) -> list[str]:
        if self._dir.fs is not None:
            self._dir.fs.invalidate_cache(self._dir.path)
        try:
            return self._dir.listdir()
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _place(self, version: int) -> Place:
        return self._dir.child(version_name(version))

    def _complete(self, version: int) -> bool:
        """Whether ``vNNNN/`` is a directory holding its ``version.json`` (a regular file)."""
        folder = self._place(version)
        record = folder.child(RECORD_FILE)
        if folder.fs is None:
            try:
                return (stat.S_ISDIR(os.lstat(folder.path).st_mode)
                        and stat.S_ISREG(os.lstat(record.path).st_mode))
            except OSError:
                return False
        return folder.fs.isfile(record.path)

    def versions(self) -> list[int]:
        """The complete versions, in increasing order (leftovers of failed writes ignored).

        Returns
        -------
        list of int
        """
        found = (version_of(entry) for entry in self._entries())
        return sorted(n for n in found if n is not None and self._complete(n))

    def _missing(self, version: int, what: str = "version", fix: str = "",
                 error: type[RegistryError] = MissingVersionError) -> RegistryError:
        have = self.versions()
        listed = ("... " if len(have) > 10 else "") + ", ".join(map(str, have[-10:]))
        where = (f"it has {len(have)} versions ({listed})" if have
                 else "it has no versions yet (publish one first: ebf retrain)")
        fix = fix or f"pick one listed by `ebf registry list {self.url}`"
        return error(f"{what} {version} is not in the registry {self.url}: {where}; {fix}")

    def _check_version(self, version: Any) -> int:
        """``version`` as an existing version number, else :class:`MissingVersionError`."""
        if not is_version_number(version):
            raise RegistryError(f"a version of {self.url} is an integer from 1, got "
                                f"{version!r}")
        if not self._complete(version):
            raise self._missing(version)
        return version

    def record(self, version: int) -> dict:
        """The record (``version.json``) of a version.

        Parameters
        ----------
        version : int

        Returns
        -------
        dict
            What the publisher gave, plus ``version``, ``name`` and ``created_utc``.

        Raises
        ------
        MissingVersionError
            If the version does not exist.
        RegistryError
            If its ``version.json`` is too large, not a JSON object or names another version.
        """
        version = self._check_version(version)
        place = self._place(version).child(RECORD_FILE)
        fix = f"remove the directory {self._place(version).url} or restore its version.json"
        try:
            rec = read_object(place, MAX_RECORD_BYTES, "the version record", fix)
        except FileNotFoundError:
            raise self._missing(version) from None
        if rec.get("version") != version or not is_version_number(rec.get("version")):
            raise RegistryError(f"the version record {place.url} says it is version "
                                f"{rec.get('version')!r}, not {version}; {fix}")
        return rec

    @contextmanager
    def scratch(self) -> Iterator[str]:
        """A hidden working directory in the model's folder, removed when the block ends
        (:func:`basics.atomic.scratch_dir`): where a writer holding the lock stages a model
        before it publishes it (on the registry's file system, so the publish links its
        files rather than copying them). It is neither a version nor a leftover of one.

        Yields
        ------
        str
        """
        self._check_held("staging a model")
        with scratch_dir(self._dir.url, "stage", self.storage_options) as url:
            yield url

    def model_path(self, version: int) -> str:
        """The URL of a version's model directory (``vNNNN/model``), unchecked: to read a
        model, use :meth:`verified_model`."""
        return self._place(version).child(MODEL_DIR).url

    def verified_model(self, version: int, every_file: bool = False) -> str:
        """The URL of a version's model directory, once its model is the one recorded.

        The model's hash (:func:`ebf.artifact.model_hash`: its manifest, checked against its
        content; loading checks every array against the manifest) must equal the record's
        ``model_hash``. Versions written before records held it are served as they are,
        with a warning. With ``every_file`` (promote, rollback: a version about to become
        current), every file is also checked against the manifest, size and sha256
        (:meth:`ebf.artifact.ModelReader.verify`), so a corrupt shard is found now, not by
        the next prediction.

        Raises
        ------
        MissingVersionError
            If the version does not exist.
        RegistryError
            If the record names another hash than the model's, or the model is unreadable.
        """
        from ebf.artifact import model_hash, open_model

        record = self.record(version)
        path = self.model_path(version)
        expected = record.get("model_hash")
        try:
            found = model_hash(path, self.storage_options)
            if every_file:
                open_model(path, self.storage_options).verify()
        except (OSError, ValueError) as exc:
            raise RegistryError(f"the model of version {version} of {self.url} cannot be "
                                f"read ({exc}); restore {path} or promote another version"
                                ) from exc
        if expected is None:
            logger.warning("version %d of %s records no model hash (written by an older ebf):"
                           " serving its model unchecked", version, self.url)
        elif found != expected:
            raise RegistryError(
                f"the model of version {version} of {self.url} is not the one it recorded: "
                f"its hash is {found[:16]}, the record says {str(expected)[:16]}; the "
                f"directory {path} was replaced outside the registry. Restore it, or publish "
                "that model as a new version (ebf retrain) and promote another one")
        return path

    def current(self) -> int | None:
        """The current version (what ``REGISTRY`` without ``@version`` means), or None.

        Raises
        ------
        RegistryError
            If ``current.json`` is unreadable or names a version that is not there.
        """
        version, _ = self._pointer.read()
        if version is not None and not self._complete(version):
            raise self._missing(version, f"the current version (named by {POINTER_FILE})",
                                f"promote an existing one: ebf registry promote {self.url}@N",
                                RegistryError)
        return version

    def history(self) -> list[int]:
        """The earlier current versions, oldest first (:meth:`rollback` pops the last)."""
        return self._pointer.read()[1]

    def find(self, key: str) -> int | None:
        """The newest version whose record has ``record["key"] == key``, or None.

        Publishers store a hash of their inputs under ``"key"``, so a re-run with the same
        inputs finds the version it already published instead of publishing it again.
        """
        for version in reversed(self.versions()):
            if self.record(version).get("key") == key:
                return version
        return None

    # ------------------------------------------------------------------ the lock

    @contextmanager
    def lock(self, break_stale: bool = False) -> Iterator[Registry]:
        """Hold the registry's writer lock (``models/NAME/.lock``) within the block.

        The lock file is created exclusively and holds ``{pid, host, started_utc, token}``;
        it is removed at exit, also on exceptions, Ctrl-C and SIGTERM (the CLI turns it
        into an exception). Re-entrant within the thread holding it through this object
        (:meth:`promote` and :meth:`rollback` take it themselves).

        Parameters
        ----------
        break_stale : bool, default=False
            Remove a lock whose holder is a process of this host that no longer runs
            (killed before it could release it), then take it.

        Yields
        ------
        Registry
            This registry.

        Raises
        ------
        RegistryBusyError
            If another writer holds it: the message names the lock file, the holder, whether
            it still runs (for a process of this host), and the fix.
        """
        if self._owner == threading.get_ident():
            yield self
            return
        token, held = secrets.token_hex(16), False
        try:  # a signal right after the lock file is created must remove it too
            self._lockfile.acquire(token, break_stale)
            held = True
            self._owner, self._token = threading.get_ident(), token
            mark_output(self.url, "registry", self.storage_options)  # other writers keep out
            yield self
        finally:
            if held:  # not another thread's, which may hold it through this object
                self._owner = self._token = None
            self._lockfile.release(token, held)

    def unlock(self) -> dict | None:
        """Remove a stale lock: one whose holder is a process of this host that no longer runs
        (killed before it could release it).

        Returns
        -------
        dict or None
            The removed holder's ``pid``, ``host`` and ``started`` (UTC); None if the registry
            was not locked.

        Raises
        ------
        RegistryBusyError
            If the holder still runs, runs on another host, or the lock is unreadable: the
            lock is kept and the message names the holder.
        """
        return self._lockfile.unlock_stale()

    def _check_held(self, what: str) -> None:
        if self._owner != threading.get_ident():
            raise RegistryError(f"{what} of {self.url} needs the registry's lock: call it "
                                "inside `with registry.lock():`")
        self._lockfile.check(self._token)

    # ------------------------------------------------------------------ writing

    def _next_version(self) -> int:
        """One more than any number in use: versions, leftovers and the pointer's."""
        used = [0]
        for entry in self._entries():
            match = VERSION_DIR.fullmatch(entry) or LEFTOVER.match(entry)
            if match is not None:
                used.append(int(match[1]))
        try:
            current, history = self._pointer.read()
        except RegistryError:
            current, history = None, []
        return max(used + history + ([current] if current else [])) + 1

    def publish(self, write: Callable[[str], None], record: Mapping[str, Any],
                promote: bool = False) -> int:
        """Add a new version: ``write`` saves the model, then it appears whole, or nothing.

        Must be called while holding :meth:`lock`. The version is built in a hidden
        temporary directory: ``write(model_url)`` saves the model into ``<tmp>/model``, the
        record goes to ``<tmp>/version.json``, the directory is moved to ``vNNNN``, and only
        then, if ``promote``, the pointer names it (the previous current version goes to
        the history). If any step raises, the registry is left exactly as it was.

        Parameters
        ----------
        write : callable
            ``write(url)`` saves a model to the directory ``url`` (not yet existing), e.g.
            ``lambda url: ebf.artifact.save(model, url, storage_options=...)``.
        record : mapping
            JSON-serialisable facts about the version (``key``, ``decision``, ``metrics``,
            ``lineage``...); ``version``, ``name``, ``created_utc`` and ``model_hash`` (of
            the saved model) are set here.
        promote : bool, default=False
            Make the new version the current one.

        Returns
        -------
        int
            The new version number: one more than any number used so far.

        Raises
        ------
        RegistryError
            Without the lock, if ``record`` is not JSON, or if ``write`` saved no model;
            whatever ``write`` raises.
        """
        self._check_held("publish")
        if not isinstance(record, Mapping):
            raise RegistryError(f"the record of a new version of {self.url} must be a dict, got "
                                f"{type(record).__name__}")
        version = self._next_version()
        full = {**record, "version": version, "name": self.name, "created_utc": now_utc()}
        check_record(full, self.url)  # what could not be read back is not written
        target = self._place(version)
        before = self._pointer.raw()
        current, history = self._pointer.read_or_reset() if promote else (None, [])
        tmp_url = None
        try:
            with atomic_dir(target.url, "model", container=self.url,
                            storage_options=self.storage_options) as tmp:
                tmp_url = tmp  # a version is marked by version.json, not by a model manifest
                folder = Place.of(tmp, self.storage_options)
                model = folder.child(MODEL_DIR)
                write(model.url)
                if not model.child("manifest.json").lexists():
                    raise RegistryError(f"write({model.url!r}) saved no model there (no "
                                        "manifest.json); it must call ebf.save(model, url)")
                from ebf.artifact import model_hash

                full["model_hash"] = model_hash(model.url, self.storage_options)
                _write_record(folder.child(RECORD_FILE), json.dumps(full, indent=1).encode())
            if promote:
                self._check_held("promoting the new version")
                self._pointer.write(version, history + [current] if current else history)
        except BaseException:
            self._undo(version, tmp_url, before)
            raise
        logger.info("%s: published version %d%s", self.url, version,
                    " (current)" if promote else "")
        return version

    def _undo(self, version: int, tmp_url: str | None, pointer: bytes | None) -> None:
        """Put the registry back as it was before a failed publish of ``version``."""
        places = [] if tmp_url is None else [Place.of(tmp_url, self.storage_options)]
        try:
            self._pointer.restore(pointer)  # the pointer first: it must not dangle
            places.insert(0, self._place(version))
            for place in places:
                if place.lexists():
                    place.remove()
        except Exception as exc:  # the original failure is the one to report
            logger.error("could not undo the failed publish of version %d in %s (%s): if "
                         "current.json names it, it stays", version, self.url, exc)

    def promote(self, version: int) -> int:
        """Make ``version`` the current one (the previous current goes to the history).

        Takes the lock. Promoting the current version changes nothing.

        Returns
        -------
        int
            ``version``.

        Raises
        ------
        MissingVersionError, RegistryBusyError
        """
        with self.lock():
            self.verified_model(version, every_file=True)  # the model it recorded, intact
            current, history = self._pointer.read_or_reset()
            if current != version:
                self._pointer.write(version, history + [current] if current else history)
            return version

    def rollback(self) -> int:
        """Point back to the version that was current before the current one.

        Takes the lock. The version rolled back from is not kept in the history, so two
        rollbacks go two versions back.

        Returns
        -------
        int
            The version now current.

        Raises
        ------
        RegistryError
            If there is no earlier current version, or it no longer exists.
        RegistryBusyError
        """
        with self.lock():
            current, history = self._pointer.read()
            if not history:
                now = f"version {current} is current" if current else "no version is current"
                raise RegistryError(
                    f"nothing to roll back to in {self.url}: {now} and no earlier one was "
                    f"promoted; promote a version instead: ebf registry promote {self.url}@N")
            previous = history[-1]
            self.verified_model(previous, every_file=True)
            self._pointer.write(previous, history[:-1])
            return previous

    # ------------------------------------------------------------------ specs

    @classmethod
    def at(cls, url: str, storage_options: Mapping[str, Any] | None = None,
           name: str | None = None) -> Registry | None:
        """The registry at ``url`` (a root or ``ROOT/models/NAME``), None if it is none.

        Raises
        ------
        RegistryError
            A root with no model or several (without ``name``).
        """
        found = locate(url, storage_options, name)
        return None if found is None else cls(*found, storage_options)

    @classmethod
    def parse(cls, spec: str | os.PathLike, storage_options: Mapping[str, Any] | None = None,
              name: str | None = None) -> tuple[Registry, int | None]:
        """``REGISTRY[@version]`` as ``(registry, version or None for the current one)``.

        Parameters
        ----------
        spec : str or path-like
            ``ROOT`` (a registry root holding exactly one model name), ``ROOT/models/NAME``,
            either followed by ``@3``, ``@v3`` or ``@v0003``.
        storage_options : dict, optional
        name : str, optional
            The model name, when ``spec`` is a root holding several.

        Raises
        ------
        RegistryError
            If ``spec`` is no registry, or a root with no model or several (the message
            lists them and says to write ``ROOT/models/NAME``).
        """
        where, version = split_spec(os.fspath(spec))
        registry = cls.at(where, storage_options, name)
        if registry is None:
            raise RegistryError(
                f"{where} is not a model registry: it has no models/ directory and is not "
                "ROOT/models/NAME; pass a registry root (ebf retrain writes one)")
        return registry, version

    def resolve(self, version: int | None = None) -> int:
        """``version`` checked to exist, or the current version if None.

        Raises
        ------
        MissingVersionError
            A version that is not there, an empty registry or one without a current version.
        """
        if version is not None:
            return self._check_version(version)
        current = self.current()
        if current is None:
            have = self.versions()
            if not have:
                raise MissingVersionError(f"the registry {self.url} has no versions yet; "
                                          "publish one first (ebf retrain)")
            raise MissingVersionError(
                f"the registry {self.url} has {len(have)} versions but no current one; "
                f"promote one (ebf registry promote {self.url}@{have[-1]}) or name it: "
                f"{self.url}@{have[-1]}")
        return current


def _write_record(place: Place, data: bytes) -> None:
    if place.fs is None:
        with open(place.path, "xb") as f:
            f.write(data)
    else:
        place.fs.pipe_file(place.path, data)
