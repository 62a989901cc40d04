"""The files of a model registry: their names, reading them as untrusted input, the lock.

What :mod:`pipelines.registry.store` builds on: the layout's names (``vNNNN`` directories, the
record, the pointer, the lock), where a ``REGISTRY[@version]`` spec points
(:func:`split_spec`, :func:`locate`), the errors, JSON objects read within a size limit
(:func:`read_object`) and :class:`LockFile`, the writer lock (``ROOT/models/NAME/.lock``)
that makes a second writer fail at once with a message naming the holder, whether it still
runs and the fix.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from basics.atomic import replace_file
from basics.places import (
    MAX_JSON_DEPTH,
    Place,
    fsync,
    host_name,
    json_depth,
    pid_alive,
    read_json,
    read_limited,
)

__all__ = [
    "LEFTOVER", "LOCK_FILE", "MAX_JSON_BYTES", "MODEL_DIR", "NAME", "POINTER_FILE",
    "RECORD_FILE", "VERSION_DIR", "LockFile", "MissingVersionError", "Pointer",
    "RegistryBusyError", "RegistryError", "check_record", "is_version_number", "locate",
    "now_utc", "read_object", "remove_file", "split_spec", "version_name", "version_of",
]

logger = logging.getLogger(__name__)

MODEL_DIR = "model"
RECORD_FILE = "version.json"
POINTER_FILE = "current.json"
LOCK_FILE = ".lock"
#: Largest registry JSON file read back (bytes): a version record, the pointer. Every
#: registry file is also read at most ``basics.places.MAX_JSON_DEPTH`` (64) levels deep.
MAX_JSON_BYTES = 1 << 24
#: Largest lock file and pointer read back (bytes).
MAX_LOCK_BYTES = 1 << 16
MAX_POINTER_BYTES = MAX_JSON_BYTES
#: Earlier current versions kept in the pointer (the oldest are dropped beyond this).
MAX_HISTORY = 10_000

VERSION_DIR = re.compile(r"v([0-9]{4,9})", re.ASCII)
LEFTOVER = re.compile(r"\.v([0-9]{4,9})\.(?:tmp|old)-", re.ASCII)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", re.ASCII)
SPEC_VERSION = re.compile(r"v?([0-9]{1,9})", re.ASCII)


def version_name(version: int) -> str:
    """The directory name of a version: ``v0003``."""
    return f"v{version:04d}"


def version_of(entry: str) -> int | None:
    """The version of a directory name ``v0003`` (canonical names only: not ``v00003``)."""
    match = VERSION_DIR.fullmatch(entry)
    if match is None or entry != version_name(int(match[1])):
        return None
    return int(match[1])


class RegistryError(ValueError):
    """A registry that cannot be used as asked: the message names the path and the fix."""


class RegistryBusyError(RegistryError):
    """Another writer holds the registry's lock."""


class MissingVersionError(RegistryError):
    """A version (or a current version) that the registry does not have."""


def now_utc() -> str:
    """The time as the registry writes it: ``2026-11-23T18:25:21Z``."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_version_number(value: Any) -> bool:
    """Whether ``value`` is an int from 1 (not a bool, not a float)."""
    return type(value) is int and value >= 1


def read_object(place: Place, limit: int, what: str, fix: str) -> dict:
    """The JSON object in the (untrusted) file ``place``; FileNotFoundError if absent.

    The file is read by :func:`basics.places.read_json`: a regular file of at most ``limit``
    bytes of UTF-8, nested at most :data:`basics.places.MAX_JSON_DEPTH` levels deep, checked
    before it is parsed; anything else is a :class:`RegistryError` naming the file, the
    limit it breaks and ``fix``.
    """
    try:
        obj = read_json(place, limit, max_depth=MAX_JSON_DEPTH)
    except FileNotFoundError:
        raise
    except ValueError as exc:  # the message names the file and the limit
        raise RegistryError(f"{what} cannot be read: {exc}; {fix}") from exc
    except OSError as exc:
        raise RegistryError(f"{what} cannot be read: {place.url}: {exc.strerror or exc}; "
                            f"{fix}") from exc
    if not isinstance(obj, dict):
        raise RegistryError(f"{what} {place.url} holds a JSON {type(obj).__name__}, not an "
                            f"object; {fix}")
    return obj


def check_record(record: Mapping[str, Any], registry: str) -> None:
    """Refuse a version record that cannot be written as JSON, or could not be read back by
    :func:`read_object`: more than :data:`MAX_JSON_BYTES` or nested deeper than
    :data:`basics.places.MAX_JSON_DEPTH`."""
    start = f"the record of a new version of {registry}"
    try:
        data = json.dumps(record, indent=1).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise RegistryError(f"{start} cannot be written as JSON ({exc}); pass str, numbers, "
                            "lists and dicts") from exc
    if len(data) + 1024 > MAX_JSON_BYTES:  # room for the model's hash, added once it is saved
        raise RegistryError(f"{start} would hold {len(data):,} bytes, more than the "
                            f"{MAX_JSON_BYTES - 1024:,} a registry reads back; record less")
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise RegistryError(f"{start} would nest {depth} levels deep, more than the "
                            f"{MAX_JSON_DEPTH} a registry reads back; record flatter values")


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
            obj = read_object(place, MAX_LOCK_BYTES, "the lock file", "")
        except (FileNotFoundError, RegistryError):
            return None
        pid = obj.get("pid")
        return cls(pid if is_version_number(pid) else None, str(obj.get("host", "")) or None,
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


def remove_file(place: Place) -> None:
    """Remove the file at ``place``."""
    if place.fs is None:
        os.unlink(place.path)
    else:
        place.fs.rm_file(place.path)
        place.fs.invalidate_cache(place.parent().path)


def split_spec(spec: str) -> tuple[str, int | None]:
    """``"root@v3"`` -> ``("root", 3)``; an ``@`` not followed by a version stays in place."""
    where, at, tail = spec.rpartition("@")
    match = SPEC_VERSION.fullmatch(tail) if at and where else None
    if match is None:
        return spec, None
    version = int(match[1])
    if version < 1:
        raise RegistryError(f"{spec}: versions start at 1 (v0001)")
    return where, version


def locate(url: str, storage_options: Mapping[str, Any] | None,
           name: str | None = None) -> tuple[str, str] | None:
    """``(root, name)`` of the registry ``url`` names (a root or ``ROOT/models/NAME``), or None.

    Raises :class:`RegistryError` for a root holding several model names (unless ``name``
    picks one) and :class:`MissingVersionError` for one holding none.
    """
    place = Place.of(url, storage_options)
    models = place.child("models")
    if models.isdir():
        if name is not None:
            return place.url, name
        names = sorted(e for e in models.listdir()
                       if NAME.fullmatch(e) and models.child(e).isdir())
        if len(names) == 1:
            return place.url, names[0]
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
        return place.parent().parent().url, place.name
    return None


class LockFile:
    """The writer lock of a registry: a file created exclusively, removed by its holder.

    Locally the file is created with ``O_CREAT | O_EXCL``; on fsspec file systems with
    ``open(path, "xb")`` where supported, else written and read back (best effort). It holds
    ``{pid, host, started_utc, token}``: the token tells the holder its own lock from one
    that replaced it, pid and host tell others who holds it and whether that process runs.

    Parameters
    ----------
    place : basics.places.Place
        The lock file (``ROOT/models/NAME/.lock``).
    registry : str
        The registry's URL, for messages.
    """

    def __init__(self, place: Place, registry: str) -> None:
        self.place, self.registry = place, registry

    def acquire(self, token: str, break_stale: bool) -> None:
        """Create the lock file for ``token``, else raise :class:`RegistryBusyError`.

        ``break_stale`` first removes a lock whose holder is a dead process of this host.
        """
        place = self.place
        folder = place.parent()
        if folder.fs is None:
            os.makedirs(folder.path, exist_ok=True)
        else:
            folder.fs.makedirs(folder.path, exist_ok=True)
        data = json.dumps({"pid": os.getpid(), "host": host_name(), "started_utc": now_utc(),
                           "token": token}).encode()
        for attempt in range(2):
            if _create_exclusive(place, data, token):
                logger.debug("locked %s", self.registry)
                return
            holder = _Holder.read(place)
            if attempt == 0 and break_stale and holder is not None and holder.dead:
                logger.warning("removing the stale lock %s of process %s (no longer running)",
                               place.url, holder.pid)
                self._break(place, holder)
                continue
            raise RegistryBusyError(self._busy_message(holder))
        raise AssertionError("unreachable")

    def unlock_stale(self) -> dict | None:
        """Remove the lock file if its holder is a dead process of this host.

        Returns
        -------
        dict or None
            The removed holder's ``pid``, ``host`` and ``started`` (None: there was no lock).

        Raises
        ------
        RegistryBusyError
            If the holder runs, runs on another host (this host cannot tell whether it runs)
            or the lock file is unreadable: naming the holder and what to do.
        """
        place = self.place
        if not place.lexists():
            return None
        holder = _Holder.read(place)
        if holder is None or not holder.dead:
            if holder is None:
                why = "it is unreadable, or a writer is just creating it"
            elif holder.host != host_name():
                why = (f"its holder, process {holder.pid} on host {holder.host}, runs on another "
                       "host, where this one cannot tell whether it still runs")
            else:
                why = f"its holder, process {holder.pid} on host {holder.host}, is still running"
            raise RegistryBusyError(
                f"not unlocking the registry {self.registry}: {why}; wait for that run to end "
                f"(or stop it), or if you are sure no writer runs, remove {place.url} by hand")
        self._break(place, holder)
        return {"pid": holder.pid, "host": holder.host, "started": holder.started}

    def _break(self, place: Place, stale: _Holder) -> None:
        """Remove the lock of dead ``stale``, but never a live writer's that replaced it."""
        if place.fs is not None:
            if (_Holder.read(place) or stale).token == stale.token:
                remove_file(place)
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

    def _busy_message(self, holder: _Holder | None) -> str:
        place = self.place
        if holder is None:
            who = "by a writer that is just starting or left it unreadable"
            fix = (f"wait and run again; if no ebf retrain, promote or rollback is running on "
                   f"this registry, remove {place.url}")
        else:
            who = (f"by process {holder.pid} on host {holder.host} since "
                   f"{holder.started} UTC")
            if holder.dead:
                who += " (that process is no longer running: the lock is stale)"
                fix = (f"remove it with `ebf registry unlock {self.registry}` (in Python: "
                       "Registry.unlock()) and run again")
            else:
                fix = (f"wait for that run to finish and run again; if that process is no "
                       f"longer running, remove {place.url}")
        return (f"the registry {self.registry} is busy: its lock file {place.url} is held "
                f"{who}; {fix}")

    def release(self, token: str, held: bool) -> None:
        """Remove the lock file if it is ``token``'s (``held``: it should be)."""
        place = self.place
        holder = _Holder.read(place)
        if holder is None or holder.token != token:
            if held:
                logger.warning("the lock %s was removed or taken over while this process "
                               "held it", place.url)
            return
        try:
            remove_file(place)
        except OSError as exc:  # the next writer is told how to remove it
            logger.warning("could not remove the lock %s: %s", place.url, exc)
        logger.debug("unlocked %s", self.registry)

    def check(self, token: str | None) -> None:
        """Raise :class:`RegistryBusyError` unless the lock file still holds ``token``."""
        holder = _Holder.read(self.place)
        if token is None or holder is None or holder.token != token:
            raise RegistryBusyError(
                f"the lock file {self.place.url} of {self.registry} was removed or taken over "
                "while this process held it; nothing more was written: check who else writes "
                "to this registry and run again")


class Pointer:
    """``current.json``: the current version and the earlier ones, replaced atomically.

    Parameters
    ----------
    place : basics.places.Place
        The pointer file (``ROOT/models/NAME/current.json``).
    registry : str
        The registry's URL, for messages.
    """

    def __init__(self, place: Place, registry: str) -> None:
        self.place, self.registry = place, registry

    def raw(self) -> bytes | None:
        """The pointer's bytes as they are, or None if absent or unreadable."""
        try:
            return read_limited(self.place, MAX_POINTER_BYTES)
        except (FileNotFoundError, ValueError):
            return None

    def read(self) -> tuple[int | None, list[int]]:
        """``(current version or None, history)`` as the file says (not checked to exist).

        Raises
        ------
        RegistryError
            If the file is too large, not a JSON object, or its entries are no versions.
        """
        fix = f"point it at an existing version: ebf registry promote {self.registry}@N"
        try:
            obj = read_object(self.place, MAX_POINTER_BYTES, "the pointer", fix)
        except FileNotFoundError:
            return None, []
        version, history = obj.get("version"), obj.get("history", [])
        if not is_version_number(version):
            raise RegistryError(f"the pointer {self.place.url} names version {version!r}, not "
                                f"an integer from 1; {fix}")
        if not isinstance(history, list) or not all(map(is_version_number, history)):
            raise RegistryError(f"the pointer {self.place.url} has a history that is not a "
                                f"list of versions; {fix}")
        return version, history

    def read_or_reset(self) -> tuple[int | None, list[int]]:
        """:meth:`read`, but an unreadable pointer counts as none (it is about to be replaced)."""
        try:
            return self.read()
        except RegistryError as exc:
            logger.warning("%s; replacing it", exc)
            return None, []

    def write(self, version: int, history: list[int]) -> None:
        """Point at ``version`` (atomically, :func:`basics.atomic.replace_file`)."""
        data = json.dumps({"version": version, "history": history[-MAX_HISTORY:],
                           "updated_utc": now_utc()}, indent=1).encode()
        replace_file(self.place, data)
        logger.info("%s: current version is now %d", self.registry, version)

    def restore(self, raw: bytes | None) -> None:
        """Put back the bytes :meth:`raw` returned earlier (None: no pointer)."""
        if self.raw() == raw:
            return
        try:
            if raw is None:
                remove_file(self.place)
            else:
                replace_file(self.place, raw)
        except OSError:
            if self.raw() != raw:  # a failure after the replace is no failure to restore
                raise
