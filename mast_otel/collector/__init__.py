"""collector stage."""
