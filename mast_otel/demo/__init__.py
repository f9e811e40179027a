"""`mast-otel demo`: synthetic SRE agents, instrumented with the SDK, through a real collector."""
