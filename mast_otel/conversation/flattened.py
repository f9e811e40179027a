"""Indexed attribute lists: `prefix.0.role`, `prefix.0.content`, `prefix.1.role` -> one mapping per index.

OTLP attributes are flat, so OpenInference and OpenLLMetry spell a list of messages as numbered
keys. `indexed` groups them back by number, in numeric order ("10" after "9"), each group keyed by
the rest of the attribute name.
"""

from __future__ import annotations

from collections.abc import Mapping

from mast_otel.spans import AttributeValue


def indexed(attributes: Mapping[str, AttributeValue], prefix: str) -> list[dict[str, AttributeValue]]:
    """The groups under `prefix.N.`, ordered by N; gaps in the numbering are closed up."""
    head = prefix + "."
    groups: dict[int, dict[str, AttributeValue]] = {}
    for key, value in attributes.items():
        if not key.startswith(head):
            continue
        number, dot, rest = key[len(head) :].partition(".")
        if dot and rest and number.isdigit():
            groups.setdefault(int(number), {})[rest] = value
    return [groups[n] for n in sorted(groups)]


def has_indexed(attributes: Mapping[str, AttributeValue], prefix: str) -> bool:
    head = prefix + "."
    return any(key.startswith(head) and key[len(head) : len(head) + 1].isdigit() for key in attributes)
