"""Issue 45's corpus, part two: numbers out of range, config typos and unclear messages (the
categories are described in ``benchmarks/probe_hostile.py``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.probe.cases import (
    CATEGORIES_45,
    SMALL_FIT,
    Case,
    Fixtures,
    Step,
    finite_predictions,
    read_predictions,
)
from benchmarks.probe.cases_limits import refusal, standard
from benchmarks.probe.files import SEED, ModelFiles, friedman, write_parquet

NUMBERS, TYPOS, MESSAGES = CATEGORIES_45[4:]
METRICS = ("rmse", "crps", "nlpd", "mae", "interval_score_90", "interval_score_50",
           "pit_distance", "max_calibration_gap")

# -- numbers out of range


def text_scores(cwd: Path, stdout: str) -> str | None:
    """Exit 0 with a table: no inf / nan, no number of more than 25 digits."""
    found = re.findall(r"(?i)(?<![\w.])-?(?:inf(?:inity)?|nan)(?![\w])|\d{25,}", stdout)
    return f"the table shows {sorted(set(f[:30] for f in found))}" if found else None


def bad_numbers(obj: Any, where: str = "") -> list[str]:
    """The metric values of a JSON tree that are null, not finite or beyond 1e300."""
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            path = f"{where}.{k}"
            if k in METRICS and (v is None or (isinstance(v, float)
                                               and not (math.isfinite(v) and abs(v) < 1e300))):
                out.append(f"{path}={v}")
            else:
                out += bad_numbers(v, path)
        return out
    if isinstance(obj, list):
        return [b for i, v in enumerate(obj) for b in bad_numbers(v, f"{where}[{i}]")]
    return []


def json_scores(file: str | None) -> Callable[[Path, str], str | None]:
    def check(cwd: Path, stdout: str) -> str | None:
        text = (cwd / file).read_text() if file else stdout
        bad = bad_numbers(json.loads(text))
        return f"the JSON holds {bad[:3]}" if bad else None
    return check


def numbers_cases(fx: Fixtures) -> list[Case]:
    def targets(value: float, every: int) -> Callable[[Path, Path], None]:
        def prepare(root: Path, cwd: Path) -> None:
            fx.sandbox(cwd)
            cols = friedman(600, SEED + 7)
            cols["y"][::every] = value
            write_parquet(cwd / "bad" / "part-0.parquet", cols)
        return prepare

    datasets = {"1e120-every-10th": (1e120, 10), "1e154-every-10th": (1e154, 10),
                "1e200-one-row": (1e200, 600), "-1e300-every-10th": (-1e300, 10),
                "1e154-all": (1e154, 1)}
    names = ("bad", "'y'", "target", "1e100", "1e+100")
    commands = {
        "evaluate": (["evaluate", "m", "bad", "--quiet"], dict(check_out=text_scores)),
        "evaluate-json": (["evaluate", "m", "bad", "--json", "ev.json", "--quiet"],
                          dict(check_out=json_scores("ev.json"), outputs=("ev.json",))),
        "registry-compare": (["registry", "compare", "REG", "bad", "--quiet"],
                             dict(check_out=text_scores)),
        "train": (["train", "bad", *SMALL_FIT, "--calibrate", "none", "--out", "new_model",
                   "--quiet"], dict(outputs=("new_model",))),
    }
    cases = []
    for dname, (value, every) in datasets.items():
        for cname, (argv, kw) in commands.items():
            steps = [refusal(argv, names, **kw)]
            if cname == "train":
                steps.append(Step(["predict", "new_model", "data", "--out", "pred", "--quiet"],
                                  role="followup", check=finite_predictions("pred")))
            cases.append(Case(f"numbers/{dname}/{cname}", NUMBERS, targets(value, every),
                              steps))
    cases.append(Case("numbers/1e154-all/registry-compare-json", NUMBERS,
                      targets(1e154, 1), [refusal(
                          ["registry", "compare", "REG", "bad", "--json", "--quiet"], names,
                          check_out=json_scores(None))]))
    return cases


# -- config typos

TYPO_VARIANTS = {  # name -> (TOML, command, the name the error must give)
    "top-misspelt-trian": ("[trian]\nseed = 1\n", "train", "trian"),
    "top-misspelt-predcit": ("[predcit]\nquantiles = [0.5]\n", "predict", "predcit"),
    "top-misspelt-al": ("[al]\nquiet = true\n", "predict", "al"),
    "top-misspelt-All": ("[All]\nquiet = true\n", "registry", "All"),
    "nested-misspelt-registry.lst": ("[registry.lst]\nname = 'ebf'\n", "registry", "lst"),
    "nested-misspelt-make-data.fridman": ("[make-data.fridman]\nrows = 10\n", "registry",
                                          "fridman"),
    "table-for-key-train.branch": ("[train.branch]\nname = 'mondrian'\n", "predict",
                                   "branch"),
    "table-for-key-predict.quantiles": ("[predict.quantiles]\nlevels = [0.5]\n", "predict",
                                        "quantiles"),
    "table-for-key-all.scheduler": ("[all.scheduler]\naddress = 'tcp://x:1'\n", "registry",
                                    "scheduler"),
    "table-for-key-registry.list.name": ("[registry.list.name]\nvalue = 'ebf'\n", "registry",
                                         "name"),
    "key-for-table-top": ("quiet = true\n[predict]\nquantiles = [0.5]\n", "predict", "quiet"),
    "key-for-table-registry": ("[registry]\nname = 'ebf'\n", "registry", "name"),
    "key-for-table-make-data": ("[make-data]\nrows = 100\n", "registry", "rows"),
    "unknown-key-in-predict": ("[predict]\nquantilez = [0.5]\n", "predict", "quantilez"),
    "unknown-key-in-all": ("[all]\nquite = true\n", "registry", "quite"),
}


def typo_cases(fx: Fixtures) -> list[Case]:
    commands = {"train": ["train", "data", *SMALL_FIT, "--calibrate", "none", "--out",
                          "new_model", "--quiet"],
                "predict": ["predict", "m", "data", "--out", "pred", "--quiet"],
                "registry": ["registry", "list", "REG"]}
    cases = []
    for name, (toml, command, named) in TYPO_VARIANTS.items():
        cases.append(Case(f"typos/{name}", TYPOS,
                          standard(fx, lambda cwd, t=toml: (cwd / "c.toml").write_text(t)),
                          [refusal([*commands[command], "--config", "c.toml"], (named,),
                                   check=lambda cwd, n=named: f"exit 0: {n!r} ignored",
                                   outputs=("new_model", "pred"))]))
    return cases


# -- unclear messages

NO_CLOUD = {  # no credentials anywhere, and every request to a closed local port
    **{k: None for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                         "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN",
                         "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                         "AWS_CONTAINER_CREDENTIALS_FULL_URI", "NO_PROXY", "no_proxy")},
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent/aws-config", "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
}


def quantile_names(cwd: Path, stdout: str) -> str | tuple[str, str] | None:
    cols, _ = read_predictions(cwd / "pred")
    q = [c for c in cols if c.startswith("q")]
    edge = [c for c in q if re.fullmatch(r"q0+|q10+", c)]
    if edge:
        return "unclear error", f"quantile columns named {edge} (levels 0 / 1)"
    return finite_predictions("pred")(cwd)


def forge_features(key: str, value: int) -> Callable[[Path], None]:
    def extra(cwd: Path) -> None:
        files = ModelFiles(cwd / "m")
        section, field = key.split(".")
        files.manifest[section][field] = value
        files.save()
    return extra


def message_cases(fx: Fixtures) -> list[Case]:
    cases = []
    s3 = "s3://ebf-probe-no-such-bucket"
    cloud = {
        "predict-input": ["predict", "m", f"{s3}/data", "--out", "pred", "--quiet"],
        "train-input": ["train", f"{s3}/data", *SMALL_FIT, "--out", "new_model", "--quiet"],
        "evaluate-input": ["evaluate", "m", f"{s3}/data", "--quiet"],
        "predict-output": ["predict", "m", "data", "--out", f"{s3}/pred", "--quiet"],
        "make-data-output": ["make-data", "friedman", "--rows", "1000", "--out",
                             f"{s3}/new", "--quiet"],
    }
    for name, argv in cloud.items():
        cases.append(Case(f"messages/s3-no-credentials/{name}", MESSAGES, standard(fx), [
            refusal(argv, ("s3://", "credentials", "AWS"), env=NO_CLOUD)]))
    configs = {  # name -> (TOML or None: missing, argv, label)
        "unknown-key": ("[train]\nn-estimaters = 3\n", ["train", "data", "--target", "y",
                                                        "--out", "new_model"], "ebf train:"),
        "bad-type": ("[predict]\nquantiles = 'many'\n", ["predict", "m", "data", "--out",
                                                        "pred"], "ebf predict:"),
        "bad-choice": ("[train]\nbranch = 'oak'\n", ["train", "data", "--target", "y",
                                                     "--out", "new_model"], "ebf train:"),
        "toml-syntax": ("[train\nseed = 1\n", ["train", "data", "--target", "y", "--out",
                                               "new_model"], "ebf train:"),
        "registry-list-key": ("[registry.list]\nnmae = 'x'\n", ["registry", "list", "REG"],
                              "ebf registry list:"),
        "missing-file": (None, ["registry", "list", "REG"], "ebf registry list:"),
    }
    for name, (toml, argv, label) in configs.items():
        def extra(cwd: Path, toml=toml) -> None:
            if toml is not None:
                (cwd / "c.toml").write_text(toml)
        cases.append(Case(f"messages/config-{name}", MESSAGES, standard(fx, extra), [
            refusal([*argv, "--config", "c.toml"], ("c.toml",), prefix=label,
                    outputs=("new_model", "pred"))]))
    predict = ["predict", "m", "data", "--out", "pred", "--quiet"]
    keeps = {"model-column": ["x0"], "duplicate": ["x0", "x0"], "duplicate-target": ["y", "y"],
             "output-name": ["mean"]}
    for name, cols in keeps.items():
        cases.append(Case(f"messages/keep-{name}", MESSAGES, standard(fx), [refusal(
            [*predict, "--keep", *cols], ("--keep", *cols), check=finite_predictions("pred"))]))
    levels = {"repeated": ["0.5", "0.5"], "repeated-spelt-apart": ["0.1", "0.10", "0.9"],
              "extreme-0.001-0.999": ["0.001", "0.999"], "extreme-1e-9": ["1e-9", "0.5"],
              "extreme-0.9999999": ["0.5", "0.9999999"]}
    for name, qs in levels.items():
        cases.append(Case(f"messages/quantiles-{name}", MESSAGES, standard(fx), [refusal(
            [*predict, "--quantiles", *qs], ("--quantiles", "quantile level", *qs),
            check_out=quantile_names)]))
    for key, value in (("features.n_features", 7), ("features.n_features", 3),
                       ("training.n_features_in_", 7)):
        cases.append(Case(f"messages/forged-{key}={value}", MESSAGES,
                          standard(fx, forge_features(key, value)), [refusal(
                              predict, ("manifest", "n_features", "'m'", "m:", "m/"),
                              check=finite_predictions("pred"))]))

    def existing(cwd: Path) -> None:
        shutil.copytree(fx.pristine["ebf_bayesian"], cwd / "old_pred")
        (cwd / "ro").mkdir()
        (cwd / "ro").chmod(0o555)
    errno = {  # name -> (argv, the path named, unprivileged)
        "predict-out-exists": (["predict", "m", "data", "--out", "old_pred", "--quiet"],
                               "old_pred", False),
        "train-out-exists": (["train", "data", *SMALL_FIT, "--out", "m", "--quiet"], "m",
                             False),
        "make-data-out-exists": (["make-data", "friedman", "--rows", "100", "--out", "data",
                                  "--quiet"], "data", False),
        "evaluate-json-user-file": (["evaluate", "m", "data", "--json", "precious.txt",
                                     "--quiet"], "precious.txt", False),
        "predict-out-under-a-file": (["predict", "m", "data", "--out", "precious.txt/p",
                                      "--quiet"], "precious.txt", False),
        "evaluate-json-under-a-file": (["evaluate", "m", "data", "--json", "precious.txt/e",
                                        "--quiet"], "precious.txt", False),
        "train-out-permission-denied": (["train", "data", *SMALL_FIT, "--out", "ro/new_model",
                                         "--quiet"], "ro", True),
        "evaluate-json-permission-denied": (["evaluate", "m", "data", "--json", "ro/e.json",
                                             "--quiet"], "ro", True),
    }
    for name, (argv, path, unprivileged) in errno.items():
        cases.append(Case(f"messages/errno-{name}", MESSAGES, standard(fx, existing), [refusal(
            argv, (path,), unprivileged=unprivileged and os.geteuid() == 0)]))
    return cases


def messages_corpus(fx: Fixtures) -> list[Case]:
    return numbers_cases(fx) + typo_cases(fx) + message_cases(fx)
