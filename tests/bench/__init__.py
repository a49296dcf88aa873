"""Tests of the benchmarks: their pure parts and small end-to-end runs."""
