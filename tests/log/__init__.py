"""Tests of the event log on the real broker: writer, reader, topics and dead letters."""
