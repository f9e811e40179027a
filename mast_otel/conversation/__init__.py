"""Rebuild stage: a trace's spans -> a Conversation of ordered turns (`model.py` holds the types)."""
