"""Producing tasks in bulk from JSON lines: straight to the task-requests topic, or through the store.

`lines` parses and keys the lines (pure), `to_kafka` writes them to the experiment's task-requests topic
with an idempotent producer (no store needed: the store ingests them whenever it runs), `via_store` enqueues
them through the store's HTTP API, and `status` reads from Kafka how far the store has ingested them.
"""
