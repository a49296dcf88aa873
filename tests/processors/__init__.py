"""Tests of the view processor (faust workers) against the real broker."""
