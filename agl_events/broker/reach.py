"""Whether a configured Kafka cluster answers, asked once and with a deadline, before a command relies on it.

librdkafka never fails on an unreachable cluster: it reconnects forever and logs each attempt, so a command
pointed at a wrong `--bootstrap` would hang or print pages of connection errors. Asking for metadata once,
quietly, and on failure trying each server with a plain TCP connect, turns that into one line saying which
servers failed and how.
"""

from __future__ import annotations

import socket

from agl_events.log.admin import cluster_answers
from agl_events.log.clients import LogError, error_text


class KafkaUnreachableError(RuntimeError):
    """No broker of the configured cluster answered within the timeout; the message says which and why."""


def require_reachable(bootstrap: str, timeout: float) -> None:
    """Return once a broker at `bootstrap` answers a metadata request; raise KafkaUnreachableError after `timeout` s."""
    try:
        if cluster_answers(bootstrap, timeout):
            return
        why = "the cluster answered without brokers"
    except LogError as exc:
        why = f"{error_text(exc)}; {diagnose(bootstrap, timeout)}"
    except ValueError as exc:  # librdkafka refuses the configuration itself (a malformed server list)
        why = str(exc)
    raise KafkaUnreachableError(
        f"cannot reach Kafka at {bootstrap} within {timeout:g} s ({why}). Check --bootstrap / AGL_KAFKA_BOOTSTRAP "
        "(or unset it to use the local broker), or wait longer with --kafka-timeout / AGL_KAFKA_TIMEOUT.")


def diagnose(bootstrap: str, timeout: float) -> str:
    """Per bootstrap server, what a TCP connect says ("refused", "unknown host", "answers"): the usual culprit."""
    found = []
    for server in bootstrap.split(","):
        address = server.strip().rpartition("://")[2]  # SASL_SSL://host:port -> host:port
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=min(timeout, 3.0)):
                found.append(f"{address}: accepts TCP but does not answer as Kafka")
        except ValueError:
            found.append(f"{address}: not host:port")
        except socket.gaierror:
            found.append(f"{address}: unknown host")
        except ConnectionRefusedError:
            found.append(f"{address}: connection refused")
        except OSError as exc:
            found.append(f"{address}: {exc.strerror or type(exc).__name__}")
    return ", ".join(found)
