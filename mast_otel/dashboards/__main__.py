"""`python -m mast_otel.dashboards [--check] [DIR]`: write (or compare) the generated files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mast_otel.dashboards.files import generated_files, write_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mast_otel.dashboards", description=__doc__)
    parser.add_argument("root", nargs="?", default="dashboards", type=Path, help="default ./dashboards")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs from the generator")
    args = parser.parse_args(argv)
    if args.check:
        stale = [
            relative
            for relative, content in generated_files().items()
            if not (args.root / relative).is_file()
            or (args.root / relative).read_text(encoding="utf-8") != content
        ]
        for relative in stale:
            print(f"stale: {args.root / relative}", file=sys.stderr)
        return 1 if stale else 0
    for path in write_files(args.root):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
