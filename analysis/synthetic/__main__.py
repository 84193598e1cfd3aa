"""``python -m analysis.synthetic``: the command line of :mod:`analysis.synthetic.cli`."""

from analysis.synthetic.cli import main

raise SystemExit(main())
