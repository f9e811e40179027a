"""The options `analyze` and `report` share: grouping, time window, filters, comparison."""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timedelta, timezone

from mast_otel.analysis.queries import Dimension, Scope

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def moment(text: str, now: datetime | None = None) -> datetime:
    """`24h`, `7d`, `30m`, `2w` (that long ago) or an ISO 8601 timestamp (naive means UTC)."""
    now = now or datetime.now(timezone.utc)
    relative = _RELATIVE.match(text.strip())
    if relative:
        return now - timedelta(**{_UNITS[relative.group(2)]: int(relative.group(1))})
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a relative time (24h, 7d, 30m, 2w) nor an ISO timestamp"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def add_scope_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--by",
        choices=[d.value for d in Dimension],
        default=Dimension.MODEL.value,
        help="group runs by model (default), root agent, service or service version",
    )
    parser.add_argument("--since", type=moment, help="runs started at or after: 24h, 7d or an ISO timestamp")
    parser.add_argument("--until", type=moment, help="runs started before: 1h or an ISO timestamp")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="two groups (models, or versions with --by version) side by side",
    )


def scope_from(args: argparse.Namespace) -> Scope:
    return Scope(Dimension.parse(args.by), args.since, args.until)
