"""Tests of the Trainer end to end."""
