"""Grafana dashboards, alert rules and provisioning files, generated from the analysis templates.

`python -m mast_otel.dashboards` writes them under `dashboards/` (checked in; a test asserts the
checked-in files equal what this package generates). `--check` only compares.
"""

from mast_otel.dashboards.files import generated_files, write_files

__all__ = ["generated_files", "write_files"]
