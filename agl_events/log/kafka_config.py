"""Connection settings for every Kafka client (SASL, SSL, ...): read from a file and the environment.

A secured cluster needs the same settings (`security.protocol`, `sasl.*`, `ssl.*`) on every producer,
consumer and admin client, including those in runner processes and faust workers that agl-events spawns.
They travel in the environment for that reason: `AGL_KAFKA_CONFIG` names a file (Java-style `.properties`
or a JSON object of librdkafka settings) and each `AGL_KAFKA_CONF_<NAME>` sets one property (`<NAME>`
lowercased, `_` read as `.`: `AGL_KAFKA_CONF_SASL_PASSWORD` is `sasl.password`; a property whose name has
an underscore goes in the file). Children inherit both, so no constructor has to pass them along. The
variables win over the file. The prefix is `AGL_KAFKA_CONF_`, not `AGL_KAFKA_`, because `AGL_KAFKA_BOOTSTRAP`,
`AGL_KAFKA_TIMEOUT` and the local broker's ports are agl-events' own settings, not librdkafka's.

Values are secrets as often as not, so nothing here puts one in a message: `redacted` is what may be shown.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CONFIG_FILE_ENV = "AGL_KAFKA_CONFIG"
PROPERTY_ENV_PREFIX = "AGL_KAFKA_CONF_"
#: Properties whose values must never be shown (passwords, keys, tokens, JAAS lines with passwords in them).
_SECRET = re.compile(r"password|secret|token|jaas|oauthbearer\.config|(^|\.)key(\.pem)?$|\.pem$|keystore|credential",
                     re.IGNORECASE)
REDACTED = "[redacted]"
_PROPERTY_LINE = re.compile(r"^([^=:\s]+)\s*[=:]\s*(.*)$")


class KafkaConfigError(ValueError):
    """The connection settings cannot be read; the message names the file and line, never a value."""


def is_secret(name: str) -> bool:
    return bool(_SECRET.search(name))


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` fit to print: every secret property's value replaced by `[redacted]`."""
    return {name: REDACTED if is_secret(name) else value for name, value in config.items()}


def parse_properties(text: str, source: str) -> dict[str, str]:
    """A Java-style `.properties` text: `name=value` or `name: value` lines, `#`/`!` comments, blanks."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = _PROPERTY_LINE.match(stripped)
        if match is None:
            raise KafkaConfigError(f"{source}, line {number}: expected name=value")
        name, value = match.groups()
        found[name] = value
    return found


def parse_config_file(path: Path) -> dict[str, str]:
    """The settings in `path`: a JSON object when the file starts with `{`, else `.properties` lines."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise KafkaConfigError(f"cannot read the Kafka config file {path}: {exc.strerror}") from exc
    if not text.lstrip().startswith("{"):
        return parse_properties(text, str(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:  # the message quotes no value, only where parsing stopped
        raise KafkaConfigError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str | int | float | bool) for v in data.values()):
        raise KafkaConfigError(f"{path}: expected one JSON object of librdkafka settings with scalar values")
    return {str(name): value if isinstance(value, str) else json.dumps(value) for name, value in data.items()}


def config_from_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The connection settings `environ` names: the file in `AGL_KAFKA_CONFIG`, then `AGL_KAFKA_CONF_*`."""
    config = parse_config_file(Path(environ[CONFIG_FILE_ENV])) if environ.get(CONFIG_FILE_ENV) else {}
    for variable, value in environ.items():
        if variable.startswith(PROPERTY_ENV_PREFIX) and len(variable) > len(PROPERTY_ENV_PREFIX):
            config[variable[len(PROPERTY_ENV_PREFIX):].lower().replace("_", ".")] = value
    return config


def connection_config() -> dict[str, str]:
    """This process's connection settings (read on every call: a client is made rarely, and a test or a
    command may set the variables after import)."""
    return config_from_environ(os.environ)


def aiokafka_security(config: Mapping[str, str]) -> dict[str, Any]:
    """The same settings as aiokafka's keyword arguments (faust's workers and the log-size query use aiokafka).

    aiokafka speaks PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL with PLAIN or SCRAM passwords; other
    mechanisms (GSSAPI, OAUTHBEARER) raise KafkaConfigError, naming the setting.
    """
    protocol = config.get("security.protocol", "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return {}
    if protocol not in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise KafkaConfigError(f"security.protocol {protocol} is unknown (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)")
    found: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        found["ssl_context"] = _ssl_context(config)
    if protocol.startswith("SASL_"):
        mechanism = config.get("sasl.mechanisms", config.get("sasl.mechanism", "PLAIN")).upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise KafkaConfigError(f"sasl.mechanism {mechanism} is not supported by aiokafka-based workers "
                                   "(use PLAIN or SCRAM-SHA-256/512)")
        found.update(sasl_mechanism=mechanism, sasl_plain_username=config.get("sasl.username"),
                     sasl_plain_password=config.get("sasl.password"))
    return found


def _ssl_context(config: Mapping[str, str]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.get("ssl.ca.location"))
    if certificate := config.get("ssl.certificate.location"):
        context.load_cert_chain(certificate, config.get("ssl.key.location"), config.get("ssl.key.password"))
    if config.get("enable.ssl.certificate.verification", "true").lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    return context
