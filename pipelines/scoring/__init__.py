"""Scoring a model on labelled data: the evaluation job and its tasks.

The scores themselves are records in :mod:`basics.scores` (one per score: per-row function,
partial sums, finishing step, better direction, unit). :mod:`pipelines.scoring.job` is the
evaluation job, a reducer over named columns computed from those records;
:mod:`pipelines.scoring.tasks` runs it on a cluster and is the seam that ``ebf evaluate``,
``ebf registry compare``, the retrain gate and ``ebf importance`` share.
"""
