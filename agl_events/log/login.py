"""Whether a cluster answers our metadata request, told apart from a cluster that refuses to let us in.

librdkafka treats a refused SASL login or a failed TLS handshake like a broker that is down: it reconnects
forever, and a metadata request ends, after its whole timeout, as "Broker transport failure". Its error
callback says at once what happened (`_AUTHENTICATION`: wrong user or password; `_SSL`: the broker's
certificate cannot be verified, say), so the question is asked in short slices and such a refusal ends the
wait at once, in librdkafka's own words (they name no secret).
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError

from agl_events.log.clients import LogError, make_admin

#: How often a waiting metadata request looks at the errors the client reported meanwhile, in seconds.
SLICE = 0.25


class AccessRefused(RuntimeError):
    """The cluster answered but refused us: `login` (SASL) or `tls` (the handshake); `text` is librdkafka's."""

    def __init__(self, what: str, text: str) -> None:
        super().__init__(text)
        self.what, self.text = what, text


_REFUSALS = {KafkaError._AUTHENTICATION: "login", KafkaError._SSL: "tls"}


def cluster_answers(bootstrap: str, timeout: float) -> bool:
    """Whether a broker at `bootstrap` answers a metadata request within `timeout` with brokers in it, asked
    quietly (librdkafka's connection errors are not logged). Raises AccessRefused as soon as the cluster refuses
    the login or the TLS handshake, LogError when none answers, ValueError when librdkafka refuses the server
    list itself."""
    refused: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        if error.code() in _REFUSALS:
            refused.append(error)

    admin = make_admin(bootstrap, log_level=0, error_cb=on_error)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return bool(admin.list_topics(timeout=min(SLICE, max(deadline - time.monotonic(), 0.01))).brokers)
        except LogError:
            admin.poll(0)  # serves the error callback
            if refused:
                raise AccessRefused(_REFUSALS[refused[0].code()], refused[0].str()) from None
            if time.monotonic() >= deadline:
                raise
