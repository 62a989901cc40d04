"""``python -m pipelines``: the ``ebf`` command line."""

from pipelines.entry import main

raise SystemExit(main())
