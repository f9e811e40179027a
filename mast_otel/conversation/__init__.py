"""Rebuild stage: a trace's spans -> a Conversation of ordered turns (`model.py` holds the types)."""

# Loaded first so that a convention module imported on its own finds `normalize` complete (normalize
# imports the convention modules at its end, and they import normalize's types).
from mast_otel.conversation import normalize as normalize
