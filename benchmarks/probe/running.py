"""Running a case: each step in its own subprocess and process group, under a timeout and
the signals the case sends, then classified by the outcome rules of
``benchmarks/probe_hostile.py``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.probe.cases import Case, Step, sandbox_of
from benchmarks.probe.files import sha256

OUTCOMES = ("data lost", "silent wrong answer", "crash", "hang", "unclear error", "handled")
DOCUMENTED_EXITS = {1, 2, 130, 143}
LEAKS = ("MemoryError", "Unable to allocate", "array is too big", "maximum supported dimension")
UNCLEAR = ("Traceback", "Compute Failed", "KeyError", "unexpected")
# issue 45: an error line that starts with a raw OSError, or shows a numpy repr
RAW_PREFIX = re.compile(r"^(?:ebf[\w .-]*: )?(?:error: )?\[Errno \d+\]")
NUMPY_REPR = re.compile(r"np\.(?:float|int|uint|str_|bool_)\w*\(")
#: words of which an issue-45 error line (Step.fix) must hold one: it names a fix
FIX_HINTS = ("give ", "use ", "remove", "set ", "choose", "name ", "pass ", "run ", "rename",
             "delete", "add ", "drop ", "restore", "retrain", "install", "export ", "must ",
             "at most", "at least", "--", "configure", "unset", "ask ", "point ", "write ",
             "free ", "fewer", "smaller", "lower", "split", "instead", "valid ", "expected ",
             "rescale", "raise ", "fix ", "check ", "mean ", "nearest")
#: what a last line says when it claims nothing was written (around the commit)
NOTHING_WRITTEN = re.compile(r"nothing (?:was )?written|removed|not written|discarded", re.I)
RAW_MESSAGES = (r"Arrow\w*Error", r"ArrowInvalid", r"pyarrow\.lib", r"numpy\._?core",
                r"could not convert", r"operands could not be broadcast",
                r"index -?\d+ is out of bounds", r"encountered in", r"RuntimeWarning",
                r"Parquet magic bytes", r"Couldn't deserialize thrift", r"UserWarning")
UNCAUGHT = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)\b")
TEMPORARY = re.compile(r"^\..+\.(tmp|old)-")
# ``python -c`` runner of the CLI under an address-space limit (argv[1] is the limit)
# (through ``pipelines.entry``, which handles signals from the first line, where it exists)
LIMITED = ("import resource, sys; n = int(sys.argv.pop(1)); "
           "resource.setrlimit(resource.RLIMIT_AS, (n, n)); sys.argv[0] = 'ebf'\n"
           "try:\n    from pipelines.entry import main\n"
           "except ImportError:\n    from pipelines.cli import main\n"
           "raise SystemExit(main())")

# ----------------------------------------------------------------------------- running


@dataclass
class Run:
    code: Path
    cache: Path
    timeout: float

    def env(self, extra: dict[str, str | None]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("EBF_", "DASK_", "PYTHON", "NUMBA_"))}
        env.update(PYTHONPATH=str(self.code), EBF_LOCAL_PROCESSES="0",
                   NUMBA_CACHE_DIR=str(self.cache / "numba"),
                   PYTHONPYCACHEPREFIX=str(self.cache / "pycache"), MPLBACKEND="Agg")
        for key, value in extra.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def command(self, step: Step) -> list[str]:
        prefix = []
        if step.unprivileged:  # root reads mode-000 files unless it drops these capabilities
            caps = "-dac_override,-dac_read_search"
            prefix = ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]
        if step.limit:
            return [*prefix, sys.executable, "-c", LIMITED, str(step.limit), *step.argv]
        return [*prefix, sys.executable, "-m", "pipelines", *step.argv]

    def step(self, step: Step, cwd: Path, logs: Path) -> dict:
        """Run one step; returns rc, timed_out, stderr, seconds, signal_sent."""
        out, err = logs.with_suffix(".out"), logs.with_suffix(".err")
        t0 = time.monotonic()
        with open(out, "wb") as fo, open(err, "wb") as fe:
            proc = subprocess.Popen(self.command(step), cwd=cwd, stdout=fo, stderr=fe,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=self.env(step.env))
            sent, timed_out = None, False
            while proc.poll() is None:
                elapsed = time.monotonic() - t0
                if elapsed > self.timeout:
                    _kill_group(proc.pid)
                    timed_out = True
                    break
                if step.signal and sent is None and _triggered(step.signal, elapsed, cwd, err):
                    time.sleep(step.signal[3])
                    if proc.poll() is None:
                        if step.group_signal:
                            os.killpg(proc.pid, step.signal[0])
                        else:
                            os.kill(proc.pid, step.signal[0])
                        sent = round(time.monotonic() - t0, 2)
                time.sleep(0.05)
            rc = proc.wait()
            _kill_group(proc.pid)  # workers or threads' children left behind
        return {"argv": step.argv, "rc": rc, "timed_out": timed_out,
                "seconds": round(time.monotonic() - t0, 2), "signal_sent_at": sent,
                "stderr": err.read_text(errors="replace"),
                "stdout": out.read_text(errors="replace")}


@contextlib.contextmanager
def hold_dashboard_port(port: int = 8787):
    """Keep Dask's default dashboard port taken while the cases run.

    Every local cluster then sees it taken and asks for a free port (``cluster.connect``
    checks first), instead of two cases started at the same instant racing for it and one
    printing Distributed's "port already in use" warning: noise the probe's own parallelism
    would cause. If someone else holds the port, that is the same.
    """
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(OSError):
            sock.bind(("", port))
            sock.listen(1)
        yield
    finally:
        sock.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _triggered(plan: tuple, elapsed: float, cwd: Path, err: Path) -> bool:
    _, kind, arg, _ = plan
    if kind == "after":
        return elapsed >= arg
    if kind == "file":
        return (cwd / arg).exists()
    if kind == "glob":
        return any(cwd.glob(arg))
    text = err.read_text(errors="replace") + err.with_suffix(".out").read_text(errors="replace")
    return re.search(arg, text) is not None  # "output": stdout or stderr


def snapshot(root: Path) -> dict[str, tuple]:
    """Every regular file under ``root``: size and sha256 (size and mtime if over 64 MiB)."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            file = Path(dirpath) / name
            st = file.lstat()
            rel = str(file.relative_to(root))
            if not file.is_file() or file.is_symlink():
                files[rel] = ("other", st.st_mode)
            elif st.st_size > 64 * 2**20:
                files[rel] = (st.st_size, st.st_mtime_ns)
            else:
                try:
                    files[rel] = (st.st_size, sha256(file.read_bytes()))
                except PermissionError:
                    files[rel] = (st.st_size, "unreadable")
    return files


def temporaries(root: Path) -> set[str]:
    """The hidden temporary and set-aside folders of ``atomic_dir`` under ``root``."""
    return {str(p.relative_to(root)) for p in root.rglob(".*") if TEMPORARY.match(p.name)}


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def step_outcome(step: Step, res: dict, cwd: Path, timeout: float) -> tuple[str, str]:
    err = res["stderr"]
    shown = lines(err)
    last = shown[-1] if shown else ""
    if res["timed_out"]:
        return "hang", f"no exit within {timeout:.0f} s"
    if step.commit:
        return commit_outcome(step, res, cwd, last)
    if res["rc"] < 0:
        if step.signal and res["signal_sent_at"] is not None and -res["rc"] == step.signal[0]:
            # no handler: the default action of the signal we sent (after a KeyboardInterrupt
            # traceback for SIGINT); the documented status is 130 / 143
            return "unclear error", (f"died by the signal sent ({-res['rc']}) after "
                                     f"{len(shown)} stderr lines ({last[:60]!r}), expected "
                                     f"exit {step.expect_rc}")
        return "crash", f"died by signal {-res['rc']}"
    leak = next((p for p in LEAKS if p in err), None)
    if leak:
        return "crash", f"leaked {leak!r}"
    if "Traceback (most recent call last)" in err and UNCAUGHT.match(last):
        if not last.startswith("KeyboardInterrupt"):
            return "crash", f"uncaught {last[:120]}"
    if res["rc"] in step.ok_codes:
        if step.signal and res["signal_sent_at"] is not None and step.expect_rc:
            return "unclear error", f"exit {res['rc']} after the signal, expected {step.expect_rc}"
        try:
            wrong = step.check(cwd) if step.check else None
            if not wrong and step.check_out:
                wrong = step.check_out(cwd, res.get("stdout", ""))
        except Exception as exc:  # noqa: BLE001 - an output we cannot read is wrong too
            wrong = f"output unreadable: {type(exc).__name__}: {exc}"
        if isinstance(wrong, tuple):
            return wrong
        if wrong:
            return "silent wrong answer", wrong
        unsent = " (the signal was not sent: it exited first)" if step.signal else ""
        return "handled", f"exit {res['rc']}: {step.check and 'loaded, finite' or 'ok'}{unsent}"
    written = [o for o in step.outputs if (cwd / o).exists()]
    if written:
        return "silent wrong answer", f"exit {res['rc']} but wrote {written}: {last[:80]!r}"
    problems = []
    if step.expect_rc is not None and res["rc"] != step.expect_rc:
        problems.append(f"exit {res['rc']}, expected {step.expect_rc}")
    elif res["rc"] not in DOCUMENTED_EXITS:
        problems.append(f"undocumented exit {res['rc']}")
    if len(shown) != 1:
        problems.append(f"{len(shown)} stderr lines")
    problems += [f"says {p!r}" for p in UNCLEAR if p in err]
    problems += [f"raw {p!r}" for p in RAW_MESSAGES if re.search(p, err)]
    if step.names and not any(n in last for n in step.names):
        problems.append(f"names none of {list(step.names)}")
    if RAW_PREFIX.match(last):
        problems.append("starts with a raw [Errno N]")
    if NUMPY_REPR.search(err):
        problems.append("shows a numpy repr")
    if step.prefix and not last.startswith(step.prefix):
        problems.append(f"not labelled {step.prefix!r}")
    if step.fix and not any(h in last.lower() for h in FIX_HINTS):
        problems.append("names no fix")
    if problems:
        return "unclear error", "; ".join(problems)
    return "handled", f"refused, exit {res['rc']}"


def commit_outcome(step: Step, res: dict, cwd: Path, last: str) -> tuple[str, str]:
    """A signal raced against the commit of ``step.commit``: handled only if exit 0 with the
    output complete, or 130 / 143 without it and a line that does not claim it was written;
    an exit status that disagrees with the disk is a silent wrong answer."""
    path, validate = step.commit
    rc, sent = res["rc"], res["signal_sent_at"]
    when = f"signal at {sent} s" if sent is not None else "signal not sent: it exited first"
    if (cwd / path).exists():
        try:
            wrong = validate(cwd / path)
        except Exception as exc:  # noqa: BLE001 - an output we cannot read is incomplete
            wrong = f"{type(exc).__name__}: {exc}"
        if wrong:
            return "silent wrong answer", f"exit {rc} ({when}), {path} incomplete: {wrong}"
        if rc != 0:
            return "silent wrong answer", (f"exit {rc} ({when}) but {path} is complete: "
                                           f"{last[:80]!r}")
        if NOTHING_WRITTEN.search(last):
            return "silent wrong answer", f"exit 0, {path} complete, but says {last[:80]!r}"
        return "handled", f"exit 0 with {path} complete ({when})"
    if rc == 0:
        return "silent wrong answer", f"exit 0 ({when}) but no {path}"
    if rc < 0:
        return "unclear error", f"died by signal {-rc} ({when}), no line, no {path}"
    if rc != step.expect_rc:
        return "unclear error", f"exit {rc} ({when}), expected {step.expect_rc}: {last[:80]!r}"
    if not last:
        return "unclear error", f"exit {rc}, no {path}, but no line said so"
    if re.search(r"\bwrote\b|written to|saved", last) and not NOTHING_WRITTEN.search(last):
        return "silent wrong answer", f"exit {rc}, no {path}, but says {last[:80]!r}"
    return "handled", f"exit {rc}, nothing written ({when})"


def run_case(case: Case, run: Run, work: Path, keep: bool) -> dict:
    root = sandbox_of(work, case.id)
    shutil.rmtree(root, ignore_errors=True)
    cwd = root / "cwd"
    t0 = time.monotonic()
    record = {"id": case.id, "category": case.category, "steps": []}
    try:
        case.prepare(root, cwd)
    except Exception as exc:  # noqa: BLE001 - a corpus bug: reported, not classified
        record.update(outcome="not run", detail=f"prepare failed: {type(exc).__name__}: {exc}")
        return record
    before = None
    findings: list[tuple[str, str]] = []
    ok_so_far = True
    for i, step in enumerate(case.steps):
        if step.role == "followup" and not ok_so_far:
            continue
        if step.role != "setup" and before is None:
            before, stale = snapshot(root), temporaries(root)
        res = run.step(step, cwd, root / f"step{i}")
        err_lines = lines(res.pop("stderr"))
        stdout = res.pop("stdout")
        res.update(role=step.role, stderr_lines=len(err_lines),
                   last_stderr_line=err_lines[-1][:300] if err_lines else "")
        if step.role != "setup":
            outcome, why = step_outcome(step, {**res, "stderr": "\n".join(err_lines),
                                               "stdout": stdout}, cwd, run.timeout)
            res.update(outcome=outcome, why=why)
            findings.append((outcome, f"step {i} ({step.argv[0]}): {why}"))
        ok_so_far = ok_so_far and not res["timed_out"] and res["rc"] in (0, 10)
        record["steps"].append(res)
    after = snapshot(root)
    allowed = tuple(str(Path("cwd") / a) for a in case.allowed)
    lost = sorted(p for p, v in before.items() if after.get(p) != v
                  and not any(p == a or p.startswith(a + "/") for a in allowed))
    if lost:
        findings.append(("data lost", f"{len(lost)} file(s) changed or gone: {lost[:4]}"))
    left = sorted(temporaries(root) - stale)
    if left:
        findings.append(("unclear error", f"temporary files left: {left[:3]}"))
    outcome, detail = min(findings, key=lambda f: OUTCOMES.index(f[0]))
    if outcome == "handled":  # issue 45's report: a clear refusal, or a correct result
        probed = [s for s in record["steps"] if s["role"] != "setup"]
        record["handled_as"] = "ok" if all(s["rc"] in (0, 10) for s in probed) else "clear"
    record.update(outcome=outcome, detail=detail, findings=[f"{o}: {d}" for o, d in findings],
                  seconds=round(time.monotonic() - t0, 2))
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return record
