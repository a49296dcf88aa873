"""agl-events: Agent Lightning's LightningStore rebuilt on an Apache Kafka log.

Every change is an Avro event on a Kafka topic; views are folds of those events.
"""

__version__ = "0.1.0"
