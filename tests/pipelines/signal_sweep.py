"""Signals sent at many offsets around the commit of an ``ebf`` command (issue 45, item 3).

Run as a script: ``python tests/pipelines/signal_sweep.py SPEC.json``; prints one JSON object
per run. ``SPEC`` holds ``{"work": DIR, "runs": [{"argv": [...], "out": PATH, "signal": 15,
"offset": -0.1}, ...], "pause": 0.3}``. The ``ebf`` modules are imported once, then each run
is a forked child that runs :func:`pipelines.entry.main` (its real exit, by ``os._exit``)
with the test hook of :mod:`basics.commit`: the child notes the moment just before the
commit and waits ``pause`` seconds there; the parent sends the signal ``pause + offset``
seconds after that moment, so negative offsets land before the commit, positive ones after
it, and offsets near 0 during the move itself. Each result gives the exit status (negative:
killed by that signal), stdout, stderr, the hook's moments and the directory listing.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def _moments(log: str) -> dict[str, float]:
    try:
        with open(log) as f:
            return {w: float(t) for w, t in (line.split() for line in f if line.strip())}
    except (FileNotFoundError, ValueError):
        return {}


def _status(raw: int) -> int:
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


def run_one(run: dict, pause: float, index: int, work: str) -> dict:
    log, out_file, err_file = (os.path.join(work, f"{index}.{x}") for x in ("log", "out", "err"))
    pid = os.fork()
    if pid == 0:  # the child: the ebf command, as the console script runs it
        try:
            for fd, path in ((1, out_file), (2, err_file)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            os.environ.update({"EBF_TEST_COMMIT_LOG": log, "EBF_TEST_COMMIT_PAUSE": str(pause),
                               "EBF_LOCAL_PROCESSES": "0"})
            sys.argv = ["ebf", *run["argv"]]
            from pipelines.entry import main

            status = main()
        except BaseException:  # noqa: B036 - never back into the parent's loop
            import traceback

            traceback.print_exc()
            os._exit(98)
        # the interpreter's exit, as ``sys.exit(main())`` of the console script: the exit
        # handlers run, the last of them (pipelines.entry's) ends the process
        raise SystemExit(status)
    deadline, sent = time.time() + 120, None
    while time.time() < deadline:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        before = _moments(log).get("before")
        if sent is None and before is not None:
            time.sleep(max(0.0, before + pause + run["offset"] - time.time()))
            sent = time.time()
            os.kill(pid, run["signal"])
        time.sleep(0.002)
    else:
        os.kill(pid, signal.SIGKILL)
        _, raw = os.waitpid(pid, 0)
    moments = _moments(log)

    def read(path: str) -> str:
        with open(path, errors="replace") as f:
            return f.read()

    parent = os.path.dirname(run["out"])
    return {**run, "status": _status(raw), "stdout": read(out_file), "stderr": read(err_file),
            "sent": sent, "before": moments.get("before"), "after": moments.get("after"),
            "listing": sorted(os.listdir(parent)) if os.path.isdir(parent) else []}


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    import threading

    import dask.dataframe  # noqa: F401
    import distributed  # noqa: F401

    import pipelines.cli  # noqa: F401 - imported once, before the forks
    import pipelines.cli.examples  # noqa: F401
    import pipelines.make_data  # noqa: F401
    import pipelines.registry.store  # noqa: F401

    assert threading.active_count() == 1, "no thread may run when the children are forked"

    for i, run in enumerate(spec["runs"]):
        print(json.dumps(run_one(run, spec["pause"], i, spec["work"])), flush=True)


if __name__ == "__main__":
    main()
