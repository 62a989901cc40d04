"""Hostile-input probe of the ``ebf`` command line (issues 26 and 45), run against a checkout.

What it measures
----------------
A seeded corpus of hostile cases, each run as ``python -m pipelines ...`` in its own
subprocess, in its own sandbox folder (the cwd holds ``data/``, a model ``m/``, a registry
``REG/`` and a user file; its parent one more), with ``PYTHONPATH=--code``. The categories:

- **output paths**: every path-valued output option of the CLI (make-data ``--out``, train
  ``--out`` / ``--baseline-out``, predict ``--out``, evaluate ``--json`` / ``--report``,
  migrate-model ``NEW``, demo ``--out``, retrain ``REGISTRY``) aimed at the input Parquet
  folder, a file in it, the model, its ``manifest.json`` and ``head.pack``, a registry
  version's model and its ``version.json``, ``.`` and ``..``, with and without
  ``--overwrite``; a command that succeeds on a registry target is followed by
  ``ebf predict REG@1`` and the served ``ebf.model_hash`` compared with the published one;
- **forged values**: for each saved model type (EBF with bayesian, mondrian, smc and bart
  branches, which hold MondrianForestRegressor, SMC tree and BART states; a
  BayesianForestRegressor saved alone), a seeded sample of its stored float arrays
  (enumerated from the pack files; at most ``--arrays`` per type, one per field, the trunk's
  in one EBF only), each filled with 1e160, 1e300, -1e300 and 5e-324, and the
  recalibration map's knots moved outside [0, 1] or out of order; every pack's size and
  sha256 and the model_hash are recomputed, so only semantic checks can catch it; then
  ``ebf predict``. (``ebf predict`` takes only models with an encoder: a
  MondrianForestRegressor, SMCTreeRegressor or BARTRegressor saved alone is refused as
  "not fitted", hence their states are probed as EBF branches);
- **memory**: packs claiming 10 and 40 GiB (sparse files, the manifest's byte count and a
  sha256 edited, not hashed; with the original header or a table of one array spanning the
  file), array tables with shapes ``[0, 2**62]``, ``[2**62, 0]`` and 65 dimensions; run
  under ``RLIMIT_AS`` = 6 GiB;
- **bad inputs**: Parquet folders with mismatched schemas, duplicate columns, one and zero
  rows, targets beyond 1e100, NaN / inf features, an unreadable (mode 000; as root, run
  without CAP_DAC_OVERRIDE) and a non-Parquet file, a stale registry lock left by a
  SIGKILLed retrain (then ``ebf retrain`` again: handled only if its line names the fix
  ``ebf registry unlock``), Ctrl-C (SIGINT to the process group) during start-up and 20 s
  into a fit, SIGTERM during a write (once the temporary folder exists);
- **control**: the untouched models predicted (must succeed with finite output).

Issue 45's categories (``--category issue45``; ``benchmarks/probe/cases_limits.py`` and
``cases_messages.py``; their fixtures are one EBF, the registry ``REG`` and ``REG2``, ``REG``
retrained once more so that it holds v1 (current) and v2 (kept by the gate)):

- **unbounded inputs** (all under ``RLIMIT_AS`` = 6 GiB): a config path (``--config``, and
  ``EBF_CONFIG`` for two) that is ``/dev/zero``, ``/dev/urandom``, a FIFO, a directory, a
  binary file or a 2 MiB file, with ``registry list`` and, for the device and the FIFO,
  ``train``; a registry's record (``version.json``), pointer (``current.json``) and marker
  (``_ebf_output.json``) made huge (20 MiB more), deeply nested (100,000 levels in one
  more key), binary or a FIFO, then ``registry list`` and ``predict REG``; make-data sizes
  beyond memory and disk (rows 1e12 and 1e10, features 1e6, one row per partition of 1e6);
  absurd counts (``--n-workers`` 100000 with threads and worker processes, for train,
  predict, make-data and evaluate; ``--threads-per-worker`` 100000; ``--n-estimators`` and
  ``--trunk-leaves`` 1e9); a wide table, 600 rows x 10,000 columns, trained on all its
  columns and on two;
- **exit status around the commit**: SIGTERM (to the process, as ``kill``) and SIGINT (to
  the group, as Ctrl-C) sent to train, predict, make-data and ``evaluate --json``, once the
  temporary folder exists (just before the commit) and 0, 0.05 and 0.2 s after the output
  appeared (for ``evaluate --json``, whose temporary file lives too briefly to be seen,
  0, 0.02, 0.05 and 0.2 s after);
- **outputs together**: every command with several outputs given the same path twice, one
  inside another, or a file where a folder will be (``evaluate --json X --report X``,
  ``--json`` inside or as the report's ``<stem>_figures`` folder, ``--predictions`` with
  ``--json`` / ``--report`` on or inside it, the figures folder an existing user file;
  ``train --out`` and ``--baseline-out`` the same or nested);
- **registry trust**: ``registry promote REG@2`` and ``registry rollback`` (pointer forged
  to v2 with v1 in the history) to a version whose shard 0 or 1 has 64 bytes flipped (size
  kept), is truncated or missing; then ``predict REG``; and both with the version intact;
- **numbers out of range**: targets 1e120, 1e154 and -1e300 in every tenth row, 1e200 in
  one row, 1e154 in all, given to ``evaluate`` (table and ``--json``), ``registry compare``
  and ``train`` (then predict with the model it made);
- **config typos**: a misspelt table at the top ([trian], [predcit], [al], [All]) and
  nested ([registry.lst], [make-data.fridman]), a table where a key belongs
  ([train.branch], [predict.quantiles], [all.scheduler], [registry.list.name]), a key where
  a table belongs (at the top, in [registry], in [make-data]), an unknown key in [predict]
  and [all];
- **unclear messages**: an ``s3://`` input or output with no credentials (every ``AWS_*``
  credential variable unset, the metadata service disabled, ``AWS_ENDPOINT_URL`` and the
  proxies a closed port of 127.0.0.1, so no case reaches the network); config errors (an
  unknown key, a bad type or choice, a TOML syntax error, a missing file) whose line must
  be labelled with the command (``ebf train:``); ``--keep`` of a column the model uses,
  twice, the target twice, an output's name; repeated quantile levels (0.5 0.5, 0.1 0.10)
  and extreme ones (0.001, 0.999, 1e-9, 0.9999999); a model manifest's feature count
  forged (7 and 3 of 5, ``n_features_in_`` 7; hash recomputed); refusals that would start
  with a raw ``[Errno N]`` (an output that exists, a path under a file, a read-only folder
  as root without CAP_DAC_OVERRIDE).

Outcome rules (one per case: the worst of its steps and of the sandbox check, in this order)
---------------------------------------------------------------------------------------------
- ``data lost``: a byte of a file that existed in the sandbox before the probed command
  (input data, model, registry, the user files of ``.`` and ``..``) changed or vanished,
  unless the command was asked (``--overwrite``) to replace an ebf output of the same kind
  it writes (``train --out m --overwrite``); a registry's files count as the registry's,
  not as a model to replace;
- ``silent wrong answer``: exit 0 but non-finite mean / std / quantiles in the predictions,
  a registry serving a model whose hash differs from the one its version was published
  with, or quantile columns moved by a forged recalibration map;
- ``crash``: death by a signal, an uncaught Python traceback (other than
  KeyboardInterrupt), or a MemoryError-type leak (``MemoryError``, "Unable to allocate",
  "array is too big", "maximum supported dimension") anywhere in stderr, whatever the exit
  code: running out of memory on a file's say-so is a crash here, not an unclear error;
- ``hang``: no exit within ``--timeout`` seconds (the process group is then killed);
- ``unclear error``: a nonzero exit that is not a documented one (1, 2, 130, 143), or
  stderr of more than one line (Dask log lines and worker tracebacks count), or containing
  "Traceback", "Compute Failed", "KeyError", "unexpected" or a raw pyarrow / numpy message,
  or naming none of the offending file / column / path; a KeyboardInterrupt traceback or
  death by the SIGINT / SIGTERM the case sent (no handler); a signal case without its
  status (130 for SIGINT, 143 for SIGTERM); temporary ``.*.tmp-*`` / ``.*.old-*``
  folders left behind (other than those a SIGKILLed setup step left);
- ``handled``: one clear line and a documented nonzero exit, nothing changed; or exit 0 with
  a correct result (a forged model that loads and predicts finite values, a bad input that
  is readable after all).

Issue 45 adds (for every category, the issue-26 ones included, where they apply):

- ``unclear error`` also when the error line starts with a raw ``[Errno N]`` or stderr shows
  a numpy repr (``np.float64(0.5)``); for issue 45's refusals, when the line names no fix
  (none of ``running.FIX_HINTS``: "use", "give", "remove", an option...), or is not
  labelled with the command where the case says so (config errors: ``ebf train:``);
- ``silent wrong answer`` also when a nonzero exit leaves an output of the command written
  (the status disagrees with the disk), when ``evaluate`` / ``registry compare`` exit 0 with
  inf / nan / null or a number of more than 25 digits as a score, when a config typo is
  ignored (exit 0), and when promote / rollback make current a version whose files do not
  match its manifest;
- around the commit, a case is ``handled`` only if it exits 0 with the output complete
  (a model's files matching its manifest, all rows of a table, a JSON that parses) and no
  line saying nothing was written, or exits 130 / 143 (the signal's) with no output, no
  temporary folder left and a line that does not claim it was written; an exit status
  that disagrees with the disk (non-zero with the output complete, 0 without it, an
  incomplete output) is a ``silent wrong answer``, death by the signal or another status
  ``unclear error``;
- quantile columns named as level 0 or 1 (``q0``, ``q00``, ``q100``) for levels inside
  (0, 1) are an ``unclear error``;
- the report splits ``handled`` into ``clear`` (refused: documented status, one line
  naming the cause and a fix) and ``handled (ok)`` (exit 0, correct result).

How to run
----------
From the repository root, with the project's environment active (this driver itself uses
only the standard library, numpy and pyarrow, so it runs any checkout; its parts are in
``benchmarks/probe/``)::

    python -m benchmarks.probe_hostile --code /work/wt-before --label before
    python -m benchmarks.probe_hostile --code /work/main --label after
    python -m benchmarks.probe_hostile --report-only      # probe.md from the JSON files
    python -m benchmarks.probe_hostile --code /work/main --label after --category issue45 \
        --timeout 60
    python -m benchmarks.probe_hostile --report-only --category issue45

It writes ``benchmarks/results/issue26/probe_<label>.json`` (every case: outcome, exit
codes, last stderr line) and regenerates ``probe.md`` from every ``probe_*.json`` there;
a run of issue 45's categories only (``--category issue45``, or some of them by name,
repeatable) writes to ``benchmarks/results/issue45/`` (``--results`` names another folder),
whose ``probe.md`` counts clear / ok / unclear / crash / hang / silent / data lost per
category for every label (before / mid / after).
``--only REGEX`` runs the matching case ids, ``--list`` prints the corpus, ``--jobs``
cases run at once (default 2), ``--keep`` keeps the sandboxes. Scratch goes to
``--work`` (default: a folder in the system's temporary directory); numba's cache and the
bytecode go to ``--cache`` so the checkouts are not written to. ``--only REGEX --merge``
reruns some cases into an existing JSON. While the cases run the driver holds Dask's
dashboard port 8787, so that two cases starting together do not race for it (a warning
only the probe's parallelism would cause); every case then takes a free port.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.probe.cases import CATEGORIES, CATEGORIES_26, CATEGORIES_45, MODEL_TYPES, Case
from benchmarks.probe.cases import corpus as corpus_26
from benchmarks.probe.cases_limits import limits_corpus
from benchmarks.probe.cases_messages import messages_corpus
from benchmarks.probe.files import SEED
from benchmarks.probe.fixtures import build_fixtures, git
from benchmarks.probe.report import RESULTS, RESULTS_45, summarize, write_markdown
from benchmarks.probe.running import Run, hold_dashboard_port, run_case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, help="checkout to probe (its PYTHONPATH)")
    parser.add_argument("--label", help="name of the run: probe_<label>.json")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per step")
    parser.add_argument("--arrays", type=int, default=2,
                        help="float arrays sampled per model type, one per field (the same "
                        "array of every tree or branch is one field); each gets every value")
    parser.add_argument("--only", help="regex of the case ids to run")
    parser.add_argument("--list", action="store_true", help="print the corpus, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the case sandboxes")
    parser.add_argument("--work", type=Path,
                        help="scratch folder (default: a new one in $TMPDIR, removed at the "
                        "end unless --keep; name one to --reuse-fixtures)")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "ebf-probe-cache",
                        help="numba cache and bytecode (kept between runs)")
    parser.add_argument("--reuse-fixtures", action="store_true",
                        help="reuse the models of an earlier run on the same commit")
    parser.add_argument("--merge", action="store_true",
                        help="with --only: replace those cases in the existing probe_<label>.json")
    parser.add_argument("--report-only", action="store_true",
                        help="only regenerate probe.md from the JSON files")
    parser.add_argument("--category", action="append", metavar="NAME",
                        help="run only this category (repeatable; 'issue26' and 'issue45' "
                        f"name theirs): {', '.join(CATEGORIES)}")
    parser.add_argument("--results", type=Path,
                        help="folder of probe_<label>.json and probe.md (default: "
                        "benchmarks/results/issue45 when only issue 45's categories run, "
                        "else benchmarks/results/issue26)")
    args = parser.parse_args(argv)
    groups = {"issue26": CATEGORIES_26, "issue45": CATEGORIES_45}
    chosen = [c for name in (args.category or CATEGORIES) for c in groups.get(name, (name,))]
    unknown = sorted(set(chosen) - set(CATEGORIES))
    if unknown:
        parser.error(f"unknown categories {unknown}; they are {', '.join(CATEGORIES)}")
    results = (args.results or (RESULTS_45 if set(chosen) <= set(CATEGORIES_45) else RESULTS)
               ).resolve()
    if args.report_only:
        print(write_markdown(results).read_text())
        return 0
    if not (args.code and args.label):
        parser.error("--code and --label are required (or --report-only)")
    code = args.code.resolve()
    if not any((code / "pipelines" / cli).is_file() for cli in ("cli.py", "cli/__init__.py")):
        parser.error(f"{code} is not an ebf checkout (no pipelines/cli)")
    # a folder of its own unless named: two runs sharing one would delete each other's models
    work = (args.work or Path(tempfile.mkdtemp(prefix=f"ebf-probe-{args.label}-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    for sub in ("numba", "pycache"):
        (args.cache / sub).mkdir(parents=True, exist_ok=True)
    run = Run(code, args.cache.resolve(), args.timeout)
    # a driver started in the background by a shell ignores SIGINT, and so would the CLI it
    # starts (an ignored signal stays ignored across exec): give the cases the defaults
    for sig, handler in ((signal.SIGINT, signal.default_int_handler),
                         (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, handler)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t0 = time.monotonic()
    print(f"fixtures for {code} in {work} ...", flush=True)
    # issue 45's categories need one model type; the issue-26 ones every type
    types = MODEL_TYPES if set(chosen) & set(CATEGORIES_26) else ("ebf_bayesian",)
    fx = build_fixtures(run, work, args.reuse_fixtures, types)
    fixture_seconds = time.monotonic() - t0
    cases = []
    if set(chosen) & set(CATEGORIES_26):
        cases += corpus_26(fx, work, args.arrays)
    if set(chosen) & set(CATEGORIES_45):
        cases += limits_corpus(fx) + messages_corpus(fx)
    cases = [c for c in cases if c.category in chosen]
    if args.only:
        cases = [c for c in cases if re.search(args.only, c.id)]
    if args.list:
        for c in cases:
            print(f"{c.category:14s} {c.id}")
        print({cat: sum(c.category == cat for c in cases) for cat in chosen})
        return 0
    print(f"{len(cases)} cases, {args.jobs} at once; fixtures took {fixture_seconds:.0f} s",
          flush=True)
    records = []

    def one(case: Case) -> dict:
        try:
            rec = run_case(case, run, work, args.keep)
        except Exception as exc:  # noqa: BLE001 - a bug of the probe: reported, not classified
            rec = {"id": case.id, "category": case.category, "steps": [],
                   "outcome": "not run", "detail": f"probe error: {type(exc).__name__}: {exc}"}
        print(f"[{len(records) + 1:4d}/{len(cases)}] {rec['outcome']:19s} "
              f"{rec.get('seconds', 0):6.1f}s {case.id}", flush=True)
        records.append(rec)
        return rec

    with hold_dashboard_port(), ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, cases))
    order = {c.id: i for i, c in enumerate(cases)}
    records.sort(key=lambda r: order[r["id"]])
    out = results / f"probe_{args.label}.json"
    if args.merge:  # these records replace the same cases of the earlier full run
        report = json.loads(out.read_text())
        new = {r["id"]: r for r in records}
        report["records"] = [new.pop(r["id"], r) for r in report["records"]] + list(new.values())
        report["summary"] = summarize(report["records"])
        report.setdefault("reruns", []).append(
            {"started": started, "only": args.only, "cases": len(records),
             "commit": git(code, "rev-parse", "HEAD"), "seconds": round(time.monotonic() - t0)})
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(write_markdown(results).read_text())
        return 0
    report = {
        "label": args.label, "code": str(args.code), "commit": git(code, "rev-parse", "HEAD"),
        "dirty": bool(git(code, "status", "--porcelain", "--untracked-files=no")),
        "started": started, "seconds": round(time.monotonic() - t0, 1),
        "fixture_seconds": round(fixture_seconds, 1), "jobs": args.jobs,
        "timeout": args.timeout, "arrays_per_model": args.arrays, "seed": SEED,
        "only": args.only, "categories": chosen, "cases": len(records),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "summary": summarize(records), "records": records,
    }
    results.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    if not (args.work or args.keep):
        shutil.rmtree(work, ignore_errors=True)
    print(write_markdown(results).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
