"""Evaluation and reports.

:mod:`pipelines.report.evaluate` is what ``ebf evaluate`` runs: a saved model scored on a
labelled dataset on the cluster, with the per-row sums of
:mod:`pipelines.report.diagnostics`. :mod:`pipelines.report.metrics` scores a predictive
distribution already in memory (the ``ebf flights`` job, the benchmarks) and formats the
tables; :mod:`pipelines.report.figures`, :mod:`pipelines.report.tables` and
:mod:`pipelines.report.html` draw the results and write the self-contained HTML report.
"""
