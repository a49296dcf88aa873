"""Benchmarks: scripts that print figures. Speed is measured here, never asserted in tests."""
