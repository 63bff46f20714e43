"""``python -m landfall.cli`` is the ``landfall`` command."""

from landfall.cli import main

raise SystemExit(main())
