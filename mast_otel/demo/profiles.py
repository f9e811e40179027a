"""The demo's three simulated models: how often each succeeds and which MAST modes its runs exhibit.

The profiles echo the three models of IBM Research's MAST analysis of ITBench SRE agents: one fails
surgically (a verification slip, little else), one cannot stop, one collapses in a cascade once it
loses its context. A profile is data only; `mast_otel.demo.agents` turns a drawn set of modes into
a scripted run that exhibits them. Model names start with ``sim-`` so nobody mistakes the demo's
synthetic traces for a real model's.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mast_otel.taxonomy import mode


@dataclass(frozen=True, slots=True)
class ModeDraw:
    """How one run picks the failure modes it will exhibit.

    Every mode in `always`, exactly one of `one_of` (when given), and each mode of `maybe`
    independently with its probability.
    """

    always: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()
    maybe: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        codes = (*self.always, *self.one_of, *self.maybe)
        for code in codes:
            mode(code)  # raises KeyError naming the valid codes
        if len(set(codes)) != len(codes):
            raise ValueError(f"a mode may appear only once in a draw: {codes}")
        for code, probability in self.maybe.items():
            if not 0.0 <= probability <= 1.0:
                raise ValueError(f"probability of {code} must be in [0, 1], got {probability}")

    @property
    def bounds(self) -> tuple[int, int]:
        """The fewest and most distinct modes a draw can give."""
        fewest = len(self.always) + (1 if self.one_of else 0)
        return fewest, fewest + len(self.maybe)

    def possible(self) -> Iterator[frozenset[str]]:
        """Every set of modes `draw` can return."""
        optional = sorted(self.maybe)
        choices: list[tuple[str, ...]] = [(code,) for code in self.one_of] or [()]
        for chosen in choices:
            for size in range(len(optional) + 1):
                for extra in itertools.combinations(optional, size):
                    yield frozenset((*self.always, *chosen, *extra))

    def draw(self, rng: random.Random) -> frozenset[str]:
        picked = set(self.always)
        if self.one_of:
            picked.add(rng.choice(self.one_of))
        # Sorted so that the draw does not depend on the mapping's insertion order.
        picked.update(code for code, p in sorted(self.maybe.items()) if rng.random() < p)
        return frozenset(picked)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    key: str  # short handle: "overconfident"
    model: str  # the simulated model's name on the wire (gen_ai.request.model)
    title: str  # what its failures look like
    study_note: str  # the behaviour of the reference study's model this one echoes
    success_rate: float
    on_success: ModeDraw  # modes of successful runs: benign by construction
    on_failure: ModeDraw
    # Fraction of remediations delegated to the "remediator" sub-agent through a handoff.
    handoff_rate: float = 0.3
    # In failed runs, acts on half of the evidence: the decisive model's way of being wrong.
    jumps_to_conclusions: bool = False

    def __post_init__(self) -> None:
        for name, value in (("success_rate", self.success_rate), ("handoff_rate", self.handoff_rate)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} of profile {self.key!r} must be in [0, 1], got {value}")


PROFILES: tuple[ModelProfile, ...] = (
    ModelProfile(
        key="overconfident",
        model="sim-overconfident",
        title="decisive but overconfident (surgical failures)",
        study_note=(
            "Efficient runs; failed runs show one or two modes, typically declaring the incident "
            "resolved without checking, or despite a check that still fails."
        ),
        success_rate=0.55,
        on_success=ModeDraw(maybe=MappingProxyType({"FM-1.3": 0.15})),
        on_failure=ModeDraw(
            one_of=("FM-3.3", "FM-3.2"),
            maybe=MappingProxyType({"FM-1.3": 0.25, "FM-2.6": 0.15}),
        ),
        jumps_to_conclusions=True,
    ),
    ModelProfile(
        key="looping",
        model="sim-looping",
        title="termination crisis",
        study_note=(
            "Repeats the same calls even when it succeeds (benign step repetition); fails by not "
            "knowing when to stop and by acting against its own stated plan."
        ),
        success_rate=0.35,
        on_success=ModeDraw(maybe=MappingProxyType({"FM-1.3": 0.92})),
        on_failure=ModeDraw(
            always=("FM-1.3", "FM-1.5"),
            maybe=MappingProxyType({"FM-2.6": 0.6, "FM-3.3": 0.3}),
        ),
        handoff_rate=0.2,
    ),
    ModelProfile(
        key="cascading",
        model="sim-cascading",
        title="cascading collapse",
        study_note=(
            "Loses its context mid-run, wanders off to unrelated services, repeats itself, verifies "
            "wrongly and stops early: four to six modes per failed run."
        ),
        success_rate=0.35,
        on_success=ModeDraw(maybe=MappingProxyType({"FM-1.3": 0.35, "FM-1.4": 0.15})),
        on_failure=ModeDraw(
            always=("FM-1.4", "FM-2.3", "FM-1.3"),
            one_of=("FM-3.3", "FM-3.2"),
            maybe=MappingProxyType({"FM-2.6": 0.55, "FM-3.1": 0.55}),
        ),
        handoff_rate=0.35,
    ),
)

BY_KEY: Mapping[str, ModelProfile] = MappingProxyType({p.key: p for p in PROFILES})


def profile(key: str) -> ModelProfile:
    """Look a profile up by its key; raises KeyError naming the valid keys."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown demo profile {key!r}; expected one of {', '.join(BY_KEY)}") from None
