"""Whether a configured Kafka cluster answers, asked once and with a deadline, before a command relies on it.

librdkafka never fails on an unreachable cluster: it reconnects forever and logs each attempt, so a command
pointed at a wrong `--bootstrap` would hang or print pages of connection errors. Asking for metadata once,
quietly, and on failure trying each server with a plain TCP connect, turns that into one line saying which
servers failed and how. A cluster that refuses us (a wrong password, a certificate we cannot verify) is told apart
at once (`log.login`), and a TLS listener met without TLS is named as such.
"""

from __future__ import annotations

import socket
import ssl

from agl_events.log.clients import LogError, error_text
from agl_events.log.login import AccessRefused, cluster_answers


class KafkaUnreachableError(RuntimeError):
    """No broker of the configured cluster answered within the timeout; the message says which and why."""


#: What to check when the cluster refuses us, by what it refused (`log.login.AccessRefused.what`).
_REFUSED = {
    "login": ("Kafka at {bootstrap} refused the login ({text}). Check sasl.username, sasl.password and "
              "sasl.mechanism in --kafka-config / AGL_KAFKA_CONFIG."),
    "tls": ("the TLS handshake with Kafka at {bootstrap} failed ({text}). Check ssl.ca.location (the CA that signed "
            "the brokers' certificates) in --kafka-config / AGL_KAFKA_CONFIG."),
}


def require_reachable(bootstrap: str, timeout: float) -> None:
    """Return once a broker at `bootstrap` answers a metadata request; raise KafkaUnreachableError after `timeout` s,
    or as soon as the cluster refuses our login or TLS handshake."""
    try:
        if cluster_answers(bootstrap, timeout):
            return
        why = "the cluster answered without brokers"
    except LogError as exc:
        why = f"{error_text(exc)}; {diagnose(bootstrap, timeout)}"
    except AccessRefused as exc:
        raise KafkaUnreachableError(_REFUSED[exc.what].format(bootstrap=bootstrap, text=exc.text)) from None
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
            with socket.create_connection((host.strip("[]"), int(port)), timeout=min(timeout, 3.0)) as sock:
                speaks = " and speaks TLS: set security.protocol (SSL or SASL_SSL) in --kafka-config" \
                    if _speaks_tls(sock, host) else " but does not answer as Kafka"
                found.append(f"{address}: accepts TCP{speaks}")
        except ValueError:
            found.append(f"{address}: not host:port")
        except socket.gaierror:
            found.append(f"{address}: unknown host")
        except ConnectionRefusedError:
            found.append(f"{address}: connection refused")
        except OSError as exc:
            found.append(f"{address}: {exc.strerror or type(exc).__name__}")
    return ", ".join(found)


def _speaks_tls(sock: socket.socket, host: str) -> bool:
    """Whether the server on `sock` completes a TLS handshake (its certificate unchecked: only the protocol counts)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with context.wrap_socket(sock, server_hostname=host.strip("[]") or None):
            return True
    except (ssl.SSLError, OSError):
        return False
