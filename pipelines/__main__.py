"""``python -m pipelines``: the ``ebf`` command line."""

from pipelines.cli import main

raise SystemExit(main())
