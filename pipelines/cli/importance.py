"""``ebf importance``: permutation importance of a saved model on held-out Parquet data, on
Dask (:func:`pipelines.importance.permutation_importance`)."""

from __future__ import annotations

import argparse

from .arguments import positive_int
from .models import _MODEL_HELP, DATA_HELP
from .output import add_json_flag, print_result
from .session import finish_job_parser, job

__all__ = ["add_importance_parser"]


def add_importance_parser(sub: argparse._SubParsersAction) -> None:
    from ebf.importance import SCORINGS
    from pipelines.importance import DEFAULT_MAX_ROWS, DEFAULT_REPEATS

    im = sub.add_parser(
        "importance", help="permutation importance of a saved model on held-out Parquet data",
        description=(
            "How much the model's predictive score worsens when one feature's values are "
            "shuffled among the rows: on a seeded sample of about --max-rows held-out rows, "
            "each partition shuffled within itself, every feature --n-repeats times, on Dask. "
            "Every learner has it (impurity importances, feature_importances_, exist only for "
            "CART branches). Use rows the model was not trained on."),
    )
    im.add_argument("model", metavar="MODEL", help=_MODEL_HELP)
    im.add_argument("data", metavar="DATA", help=DATA_HELP)
    im.add_argument("--target", metavar="COL", help="target column (default: the training one)")
    losses = [s for task in SCORINGS.values() for s in task]
    im.add_argument("--scoring", choices=losses, default=None,
                    help="the loss whose increase is the importance (default: crps for "
                    "regressors, log_loss for classifiers)")
    im.add_argument("--n-repeats", type=positive_int, default=DEFAULT_REPEATS, metavar="N",
                    help=f"shuffles per feature (default: {DEFAULT_REPEATS})")
    im.add_argument("--max-rows", type=positive_int, default=DEFAULT_MAX_ROWS, metavar="N",
                    help="score about this many rows, a seeded sample; each is predicted "
                    f"1 + features x repeats times (default: {DEFAULT_MAX_ROWS:,})")
    im.add_argument("--seed", type=int, default=0, help="seed of the sample and the shuffles")
    add_json_flag(im, "the importances")
    finish_job_parser(im, _cmd_importance)


def _cmd_importance(args: argparse.Namespace) -> int:
    from pipelines.importance import format_importances, permutation_importance
    from pipelines.registry.resolve import resolve_model

    model = resolve_model(args.model)
    with job(args) as (client, bars):
        res = permutation_importance(
            model, args.data, target=args.target, scoring=args.scoring,
            n_repeats=args.n_repeats, max_rows=args.max_rows, random_state=args.seed,
            client=client, progress=lambda done, total: bars("importance", done, total))
    body = {**{k: v for k, v in res.items() if k != "importances"},
            "importances": res["importances"].to_dict(orient="records")}
    print_result(args, "importance", body, format_importances(res))
    return 0
