"""Where agl-events finds its Kafka cluster: a configured one, or the embedded local broker."""

from agl_events.broker.local import BrokerError, BrokerStatus, LocalBroker, ensure_broker, probe

__all__ = ["BrokerError", "BrokerStatus", "LocalBroker", "ensure_broker", "probe"]
