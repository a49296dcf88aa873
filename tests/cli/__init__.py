"""Tests of the command line: the `agl-events` commands driven as a user would."""
