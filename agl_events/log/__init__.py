"""The log: appending events to Kafka durably, and reading them back in order."""
