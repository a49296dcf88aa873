"""Tests of the package's shape: import graph, layering."""
