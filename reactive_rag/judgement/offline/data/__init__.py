"""Fitted numbers the agent ships (no data text); a package so wheels ship its files."""
