"""`python -m mast_otel.cli`, the same as the `mast-otel` command."""

from mast_otel.cli import main

raise SystemExit(main())
