"""conversation stage."""
