"""A versioned model registry on any file system, with an atomically replaced pointer.

Layout, under a registry root (a local path or any fsspec URL)::

    ROOT/models/NAME/
      v0001/model/          a model saved by ebf.model.save (manifest.json, head.pack, shards/)
      v0001/version.json    its record: what the publisher gave (metrics, decision, lineage,
                            an input hash under "key"), plus version, name, created_utc
      v0002/...
      current.json          {"version": 2, "history": [1], "updated_utc": ...}
      .lock                 only while a writer holds the registry: {pid, host, started_utc, token}

What it guarantees
------------------
- A version appears whole or not at all: it is written into a hidden temporary sibling
  (:func:`basics.atomic.atomic_dir`) and moved into place; only directories with their
  ``version.json`` count as versions. Leftovers of killed writers (``.v0003.tmp-...``, a
  ``v0003`` without ``version.json``) are ignored and their numbers never reused.
- The pointer is replaced in one step (:func:`basics.places.replace_file`: a temporary file
  then ``os.replace`` locally, a single-object move on object stores), and only after the
  version it names is in place, so ``current`` always names a complete version.
- :meth:`Registry.publish` fails as a whole: whatever step raises (the model's writer, the
  record, the move, the pointer), the registry is left as it was (no new version, the
  same pointer) and the temporary directories are removed.
- Writers exclude each other with a lock file (:meth:`Registry.lock`): a second writer gets
  :class:`RegistryBusyError` naming the holder and the fix. Readers take no lock.
- Everything read is untrusted: ``version.json``, ``current.json`` and the lock are read
  within a size limit and must be JSON objects of the expected shape; version numbers come
  from directory names ``v`` + at least four digits only. A registry never holds pickle
  (models are saved by :func:`ebf.model.save`).

On object stores a move copies objects, so a listing taken during a publish may show the
new version before all of its model files are copied; the pointer moves only afterwards.
Stores without conditional create (``open(path, "xb")``) make the lock best effort: it is
written, then read back to check that this writer's token is the one stored.

``REGISTRY[@version]`` (:func:`resolve_model`, :meth:`Registry.parse`) names a model in a
registry wherever a model directory is accepted (``ebf predict``, ``ebf evaluate``).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from basics.atomic import atomic_dir
from basics.places import Place, fsync, host_name, pid_alive, read_limited, replace_file

__all__ = [
    "MissingVersionError",
    "Registry",
    "RegistryBusyError",
    "RegistryError",
    "is_registry",
    "resolve_model",
]

logger = logging.getLogger(__name__)

MODEL_DIR = "model"
RECORD_FILE = "version.json"
POINTER_FILE = "current.json"
LOCK_FILE = ".lock"
#: Size limits of what is read back (bytes): a crafted file is refused, not parsed.
MAX_RECORD_BYTES = 1 << 20
MAX_POINTER_BYTES = 1 << 20
MAX_LOCK_BYTES = 1 << 16
#: Earlier current versions kept in the pointer (the oldest are dropped beyond this).
MAX_HISTORY = 10_000

_VERSION_DIR = re.compile(r"v([0-9]{4,})", re.ASCII)
_LEFTOVER = re.compile(r"\.v([0-9]{4,})\.(?:tmp|old)-", re.ASCII)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", re.ASCII)
_SPEC_VERSION = re.compile(r"v?([0-9]{1,9})", re.ASCII)


class RegistryError(ValueError):
    """A registry that cannot be used as asked: the message names the path and the fix."""


class RegistryBusyError(RegistryError):
    """Another writer holds the registry's lock."""


class MissingVersionError(RegistryError):
    """A version (or a current version) that the registry does not have."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version_name(version: int) -> str:
    return f"v{version:04d}"


def _number(entry: str) -> int | None:
    """The version of a directory name ``v0003`` (canonical names only: not ``v00003``)."""
    match = _VERSION_DIR.fullmatch(entry)
    if match is None or entry != _version_name(int(match[1])):
        return None
    return int(match[1])


def _positive_int(value: Any) -> bool:
    return type(value) is int and value >= 1  # not bool, not float


def _read_object(place: Place, limit: int, what: str, fix: str) -> dict:
    """The JSON object in the (untrusted) file ``place``; FileNotFoundError if absent."""
    try:
        data = read_limited(place, limit)
        obj = json.loads(data)
    except FileNotFoundError:
        raise
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        raise RegistryError(f"{what} {place.url} cannot be read ({exc}); {fix}") from exc
    if not isinstance(obj, dict):
        raise RegistryError(f"{what} {place.url} holds a JSON {type(obj).__name__}, not an "
                            f"object; {fix}")
    return obj


@dataclass(frozen=True)
class _Holder:
    """Who holds a lock file, as far as its content tells."""

    pid: int | None
    host: str | None
    started: str | None
    token: str | None

    @property
    def dead(self) -> bool:
        """Whether the holder is a process of this host that no longer runs."""
        return (self.pid is not None and self.host == host_name() and self.pid != os.getpid()
                and not pid_alive(self.pid))

    @classmethod
    def read(cls, place: Place) -> _Holder | None:
        try:
            obj = _read_object(place, MAX_LOCK_BYTES, "the lock file", "")
        except (FileNotFoundError, RegistryError):
            return None
        pid = obj.get("pid")
        return cls(pid if _positive_int(pid) else None, str(obj.get("host", "")) or None,
                   str(obj.get("started_utc", "")) or None, str(obj.get("token", "")) or None)


def _create_exclusive(place: Place, data: bytes, token: str) -> bool:
    """Create the file ``place`` holding ``data`` unless it exists; whether this call did."""
    if place.fs is None:
        try:
            fd = os.open(place.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync(place.parent().path, directory=True)
        except BaseException:
            os.unlink(place.path)  # never leave an empty lock behind
            raise
        return True
    fs = place.fs
    fs.invalidate_cache(place.parent().path)
    if fs.exists(place.path):
        return False
    try:
        with fs.open(place.path, "xb") as f:
            f.write(data)
    except FileExistsError:
        return False
    except (NotImplementedError, ValueError):  # no exclusive create: write, then read back
        fs.pipe_file(place.path, data)
    fs.invalidate_cache(place.parent().path)
    holder = _Holder.read(place)
    return holder is not None and holder.token == token


def _remove_file(place: Place) -> None:
    if place.fs is None:
        os.unlink(place.path)
    else:
        place.fs.rm_file(place.path)
        place.fs.invalidate_cache(place.parent().path)


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
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise RegistryError(f"invalid model name {name!r} for the registry {root}: use "
                                "letters, digits, '.', '_' and '-' (at most 100, not starting "
                                "with '.', '_' or '-')")
        self.storage_options = dict(storage_options or {})
        top = Place.of(root, self.storage_options)
        self.root, self.name = top.url, name
        self._dir = top.child("models").child(name)
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
        return self._dir.child(_version_name(version))

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
        found = (_number(entry) for entry in self._entries())
        return sorted(n for n in found if n is not None and self._complete(n))

    def _missing(self, version: int, what: str = "version", fix: str = "",
                 error: type[RegistryError] = MissingVersionError) -> RegistryError:
        have = self.versions()
        listed = ", ".join(map(str, have[-10:])) + (" ..." if len(have) > 10 else "")
        where = (f"it has {len(have)} versions ({listed})" if have
                 else "it has no versions yet (publish one first: ebf retrain)")
        fix = fix or f"pick one listed by `ebf registry list {self.url}`"
        return error(f"{what} {version} is not in the registry {self.url}: {where}; {fix}")

    def _check_version(self, version: Any) -> int:
        """``version`` as an existing version number, else :class:`MissingVersionError`."""
        if not _positive_int(version):
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
            rec = _read_object(place, MAX_RECORD_BYTES, "the version record", fix)
        except FileNotFoundError:
            raise self._missing(version) from None
        if rec.get("version") != version or not _positive_int(rec.get("version")):
            raise RegistryError(f"the version record {place.url} says it is version "
                                f"{rec.get('version')!r}, not {version}; {fix}")
        return rec

    def model_path(self, version: int) -> str:
        """The URL of a version's model directory (``vNNNN/model``), to load or predict with."""
        return self._place(version).child(MODEL_DIR).url

    def _pointer(self) -> tuple[int | None, list[int]]:
        """``(current version or None, history)`` as ``current.json`` says (not checked)."""
        place = self._dir.child(POINTER_FILE)
        fix = f"point it at an existing version: ebf registry promote {self.url}@N"
        try:
            obj = _read_object(place, MAX_POINTER_BYTES, "the pointer", fix)
        except FileNotFoundError:
            return None, []
        version, history = obj.get("version"), obj.get("history", [])
        if not _positive_int(version):
            raise RegistryError(f"the pointer {place.url} names version {version!r}, not an "
                                f"integer from 1; {fix}")
        if not isinstance(history, list) or not all(map(_positive_int, history)):
            raise RegistryError(f"the pointer {place.url} has a history that is not a list of "
                                f"versions; {fix}")
        return version, history

    def current(self) -> int | None:
        """The current version (what ``REGISTRY`` without ``@version`` means), or None.

        Raises
        ------
        RegistryError
            If ``current.json`` is unreadable or names a version that is not there.
        """
        version, _ = self._pointer()
        if version is not None and not self._complete(version):
            raise self._missing(version, f"the current version (named by {POINTER_FILE})",
                                f"promote an existing one: ebf registry promote {self.url}@N",
                                RegistryError)
        return version

    def history(self) -> list[int]:
        """The earlier current versions, oldest first (:meth:`rollback` pops the last)."""
        return self._pointer()[1]

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
            self._acquire(token, break_stale)
            held = True
            self._owner, self._token = threading.get_ident(), token
            yield self
        finally:
            if held:  # not another thread's, which may hold it through this object
                self._owner = self._token = None
            self._release(token, held)

    def _lock_place(self) -> Place:
        return self._dir.child(LOCK_FILE)

    def _acquire(self, token: str, break_stale: bool) -> None:
        if self._dir.fs is None:
            os.makedirs(self._dir.path, exist_ok=True)
        else:
            self._dir.fs.makedirs(self._dir.path, exist_ok=True)
        place = self._lock_place()
        data = json.dumps({"pid": os.getpid(), "host": host_name(), "started_utc": _now(),
                           "token": token}).encode()
        for attempt in range(2):
            if _create_exclusive(place, data, token):
                logger.debug("locked %s", self.url)
                return
            holder = _Holder.read(place)
            if attempt == 0 and break_stale and holder is not None and holder.dead:
                self._break(place, holder)
                continue
            raise RegistryBusyError(self._busy_message(place, holder))
        raise AssertionError("unreachable")

    def _break(self, place: Place, stale: _Holder) -> None:
        """Remove the lock of dead ``stale``, but never a live writer's that replaced it."""
        logger.warning("removing the stale lock %s of process %s (no longer running)",
                       place.url, stale.pid)
        if place.fs is not None:
            if (_Holder.read(place) or stale).token == stale.token:
                _remove_file(place)
            return
        aside = f"{place.path}.stale-{secrets.token_hex(4)}"
        try:
            os.rename(place.path, aside)  # atomic: what we move aside is what we check
        except FileNotFoundError:
            return
        moved = _Holder.read(Place(None, "file", aside))
        if moved is not None and moved.token != stale.token:  # a live lock: put it back
            try:
                os.link(aside, place.path)
            except FileExistsError:
                pass
        os.unlink(aside)

    def _busy_message(self, place: Place, holder: _Holder | None) -> str:
        if holder is None:
            who = "by a writer that is just starting or left it unreadable"
            fix = (f"wait and run again; if no ebf retrain, promote or rollback is running on "
                   f"this registry, remove {place.url}")
        else:
            who = (f"by process {holder.pid} on host {holder.host} since "
                   f"{holder.started} UTC")
            if holder.dead:
                who += " (that process is no longer running: the lock is stale)"
                fix = (f"remove {place.url} (or pass break_stale=True) and run again")
            else:
                fix = (f"wait for that run to finish and run again; if that process is no "
                       f"longer running, remove {place.url}")
        return f"the registry {self.url} is busy: its lock file {place.url} is held {who}; {fix}"

    def _release(self, token: str, held: bool) -> None:
        """Remove the lock file if it is this holder's (``held``: it should be)."""
        place = self._lock_place()
        holder = _Holder.read(place)
        if holder is None or holder.token != token:
            if held:
                logger.warning("the lock %s was removed or taken over while this process "
                               "held it", place.url)
            return
        try:
            _remove_file(place)
        except OSError as exc:  # the next writer is told how to remove it
            logger.warning("could not remove the lock %s: %s", place.url, exc)
        logger.debug("unlocked %s", self.url)

    def _check_held(self, what: str) -> None:
        if self._owner != threading.get_ident():
            raise RegistryError(f"{what} of {self.url} needs the registry's lock: call it "
                                "inside `with registry.lock():`")
        holder = _Holder.read(self._lock_place())
        if holder is None or holder.token != self._token:
            raise RegistryBusyError(
                f"the lock file {self._lock_place().url} of {self.url} was removed or taken "
                f"over while this process held it; nothing more was written: check who else "
                "writes to this registry and run again")

    # ------------------------------------------------------------------ writing

    def _next_version(self) -> int:
        """One more than any number in use: versions, leftovers and the pointer's."""
        used = [0]
        for entry in self._entries():
            match = _VERSION_DIR.fullmatch(entry) or _LEFTOVER.match(entry)
            if match is not None:
                used.append(int(match[1]))
        try:
            current, history = self._pointer()
        except RegistryError:
            current, history = None, []
        return max(used + history + ([current] if current else [])) + 1

    def _pointer_for_update(self) -> tuple[int | None, list[int]]:
        """The pointer a promotion replaces; an unreadable one is replaced (with a warning)."""
        try:
            return self._pointer()
        except RegistryError as exc:
            logger.warning("%s; replacing it", exc)
            return None, []

    def _write_pointer(self, version: int, history: list[int]) -> None:
        data = json.dumps({"version": version, "history": history[-MAX_HISTORY:],
                           "updated_utc": _now()}, indent=1).encode()
        replace_file(self._dir.child(POINTER_FILE), data)
        logger.info("%s: current version is now %d", self.url, version)

    def _pointer_bytes(self) -> bytes | None:
        try:
            return read_limited(self._dir.child(POINTER_FILE), MAX_POINTER_BYTES)
        except (FileNotFoundError, ValueError):
            return None

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
            ``lambda url: ebf.model.save(model, url, storage_options=...)``.
        record : mapping
            JSON-serialisable facts about the version (``key``, ``decision``, ``metrics``,
            ``lineage``...); ``version``, ``name`` and ``created_utc`` are set here.
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
        full = {**record, "version": version, "name": self.name, "created_utc": _now()}
        try:
            data = json.dumps(full, indent=1).encode()
        except (TypeError, ValueError) as exc:
            raise RegistryError(f"the record of a new version of {self.url} cannot be written "
                                f"as JSON ({exc}); pass str, numbers, lists and dicts") from exc
        target = self._place(version)
        before = self._pointer_bytes()
        current, history = self._pointer_for_update() if promote else (None, [])
        tmp_url = None
        try:
            with atomic_dir(target.url, "model", storage_options=self.storage_options) as tmp:
                tmp_url = tmp  # a version is marked by version.json, not by a model manifest
                folder = Place.of(tmp, self.storage_options)
                model = folder.child(MODEL_DIR)
                write(model.url)
                if not model.child("manifest.json").lexists():
                    raise RegistryError(f"write({model.url!r}) saved no model there (no "
                                        "manifest.json); it must call ebf.model.save(model, url)")
                _write_record(folder.child(RECORD_FILE), data)
            if promote:
                self._check_held("promoting the new version")
                _point(self, version, history + [current] if current else history)
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
            if self._pointer_bytes() != pointer:  # the pointer first: it must not dangle
                place = self._dir.child(POINTER_FILE)
                try:
                    if pointer is None:
                        _remove_file(place)
                    else:
                        replace_file(place, pointer)
                except OSError:
                    if self._pointer_bytes() != pointer:  # still naming the new version
                        raise
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
            self.record(version)  # exists and is readable
            current, history = self._pointer_for_update()
            if current != version:
                _point(self, version, history + [current] if current else history)
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
            current, history = self._pointer()
            if not history:
                now = f"version {current} is current" if current else "no version is current"
                raise RegistryError(
                    f"nothing to roll back to in {self.url}: {now} and no earlier one was "
                    f"promoted; promote a version instead: ebf registry promote {self.url}@N")
            previous = history[-1]
            self.record(previous)
            _point(self, previous, history[:-1])
            return previous

    # ------------------------------------------------------------------ specs

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
        where, version = _split(os.fspath(spec))
        registry = _locate(where, storage_options, name)
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


def _point(registry: Registry, version: int, history: list[int]) -> None:
    """Replace the pointer of ``registry`` (a seam the failure tests patch)."""
    registry._write_pointer(version, history)


def _split(spec: str) -> tuple[str, int | None]:
    """``"root@v3"`` -> ``("root", 3)``; an ``@`` not followed by a version stays in place."""
    where, at, tail = spec.rpartition("@")
    match = _SPEC_VERSION.fullmatch(tail) if at and where else None
    if match is None:
        return spec, None
    version = int(match[1])
    if version < 1:
        raise RegistryError(f"{spec}: versions start at 1 (v0001)")
    return where, version


def _locate(url: str, storage_options: Mapping[str, Any] | None,
            name: str | None = None) -> Registry | None:
    """The registry ``url`` names (a root, or ``ROOT/models/NAME``), or None if it is none."""
    place = Place.of(url, storage_options)
    models = place.child("models")
    if models.isdir():
        if name is not None:
            return Registry(place.url, name, storage_options)
        names = sorted(e for e in models.listdir()
                       if _NAME.fullmatch(e) and models.child(e).isdir())
        if len(names) == 1:
            return Registry(place.url, names[0], storage_options)
        if not names:
            raise MissingVersionError(f"the registry {place.url} holds no model yet (its "
                                      "models/ directory is empty); publish one (ebf retrain)")
        raise RegistryError(
            f"the registry {place.url} holds {len(names)} models ({', '.join(names)}); name "
            f"one: {models.url}/NAME (e.g. {models.child(names[0]).url})")
    if (place.parent().name == "models" and place.isdir()
            and not place.child("manifest.json").lexists()):  # a model saved under models/
        if name is not None and name != place.name:
            raise RegistryError(f"{place.url} is the model {place.name!r}, not {name!r}")
        return Registry(place.parent().parent().url, place.name, storage_options)
    return None


def is_registry(url: str | os.PathLike,
                storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``url`` is a registry root or ``ROOT/models/NAME`` (not a model directory).

    Examples
    --------
    >>> import tempfile
    >>> is_registry(tempfile.mkdtemp())
    False
    """
    try:
        return _locate(os.fspath(url), storage_options) is not None
    except RegistryError:  # a root with no model or several: a registry all the same
        return True


def resolve_model(spec: str | os.PathLike,
                  storage_options: Mapping[str, Any] | None = None) -> str:
    """The model directory ``spec`` names: a version in a registry, or ``spec`` itself.

    Parameters
    ----------
    spec : str or path-like
        ``REGISTRY[@version]`` (see :meth:`Registry.parse`; without a version, the current
        one), or a model directory, returned unchanged.
    storage_options : dict, optional

    Returns
    -------
    str
        A model directory (local path or URL), for :func:`pipelines.artifacts.open_artifact`.

    Raises
    ------
    RegistryError
        ``@version`` after something that is no registry, a root holding several models.
    MissingVersionError
        A version that is not there, an empty registry, or no current version.

    Examples
    --------
    >>> resolve_model("models/friedman")  # a plain model directory  # doctest: +SKIP
    'models/friedman'
    >>> resolve_model("registry@2")  # doctest: +SKIP
    '/home/me/registry/models/ebf/v0002/model'
    """
    text = os.fspath(spec)
    where, version = _split(text)
    registry = _locate(where, storage_options)
    if registry is None:
        if version is None or Place.of(text, storage_options).lexists():
            return text
        raise RegistryError(
            f"{text}: {where} is not a model registry (no models/ directory, not "
            "ROOT/models/NAME), so @version means nothing; pass a registry or a model directory")
    return registry.model_path(registry.resolve(version))
