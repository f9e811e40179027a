"""What every `mast-otel` command shares: exit codes, help formatting, the store options."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

EXIT_OK = 0
EXIT_FAILURE = 1  # the command ran and failed (e.g. spans accepted but not stored)
EXIT_USAGE = 2  # bad arguments or options (argparse uses 2 as well)
EXIT_UNAVAILABLE = 3  # the store or collector could not be reached or opened

EXIT_CODES_HELP = """\
exit codes:
  0  success
  1  the command ran and failed (e.g. spans accepted but not stored)
  2  usage error: bad arguments or options
  3  the store or collector could not be reached or opened
"""

DEFAULT_STORE = "mast-otel-data"

Subcommands = Any  # argparse's _SubParsersAction is private; this is what `register` receives


def add_command(
    commands: Subcommands, name: str, *, help: str, description: str, examples: str
) -> argparse.ArgumentParser:
    """A subcommand whose --help teaches: what it does, examples, exit codes."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help,
        description=textwrap.dedent(description),
        epilog="examples:\n"
        + textwrap.indent(textwrap.dedent(examples).strip(), "  ")
        + "\n\n"
        + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        default=DEFAULT_STORE,
        help=f"chDB data directory or ClickHouse URL (default ./{DEFAULT_STORE})",
    )
    parser.add_argument("--database", default="mast", help="ClickHouse database (default mast)")


def fail(command: str, message: object, code: int) -> int:
    """Print `mast-otel COMMAND: message` to stderr and return the exit code."""
    print(f"mast-otel {command}: {message}", file=sys.stderr)
    return code
