"""Evaluation and reports.

:mod:`pipelines.report.evaluate` is what ``ebf evaluate`` runs: a saved model scored on a
labelled dataset on the cluster, by the evaluation job of :mod:`pipelines.scoring`;
:mod:`pipelines.report.compare` scores several models on the same data (``ebf registry
compare``). :mod:`pipelines.report.metrics` scores a predictive
distribution already in memory (the ``ebf flights`` job, the benchmarks) and formats the
tables; :mod:`pipelines.report.figures`, :mod:`pipelines.report.tables` and
:mod:`pipelines.report.html` draw the results and write the self-contained HTML report.
"""
