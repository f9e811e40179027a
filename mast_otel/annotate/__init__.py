"""Annotate stage: a Conversation in, MAST findings (mode, evidence, confidence, explanation) out.

`base.py` holds the `Annotator` interface and the `Finding` types; `rules/` the offline detectors.
"""
