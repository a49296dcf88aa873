"""Tests of the embedded local Kafka broker and its CLI."""
