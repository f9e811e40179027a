"""Analyze stage: failure profiles per model, agent, service or version, from the store's SQL."""

from mast_otel.analysis.profiles import GroupProfile, ModePrevalence, compute_profiles, profiles_to_json
from mast_otel.analysis.queries import Dimension
from mast_otel.analysis.render import render_profiles

__all__ = [
    "Dimension",
    "GroupProfile",
    "ModePrevalence",
    "compute_profiles",
    "profiles_to_json",
    "render_profiles",
]
