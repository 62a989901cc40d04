"""The hostile-input probe of the ``ebf`` command line: its corpus, runner and report.

``benchmarks/probe_hostile.py`` is the command and states the corpus and the outcome rules;
``files`` writes the data and reads, forges and rewrites model files as ``ebf`` writes them,
``cases`` builds the corpus, ``running`` runs a case in its sandbox and classifies it,
``fixtures`` trains the models every case starts from, ``report`` writes ``probe.md``.
"""
