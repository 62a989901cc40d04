"""The model registry and the jobs that write it.

:mod:`pipelines.registry.store` (:class:`~pipelines.registry.store.Registry`: versions and
the current-version pointer), :mod:`pipelines.registry.files` (the layout's names, the lock,
reading its files as untrusted input), :mod:`pipelines.registry.resolve`
(``REGISTRY[@version]`` wherever a model directory is taken), :mod:`pipelines.registry.lineage`
(what a version was made from) and :mod:`pipelines.registry.retrain` (``ebf retrain``).
"""
