"""Kafka connection settings (SASL, SSL): read from a file and `AGL_KAFKA_CONF_*`, given to every client
under agl-events' own settings, and never shown: not in a repr, an error or a log line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agl_events.broker.reach import KafkaUnreachableError, require_reachable
from agl_events.log.clients import admin_config, consumer_config, make_admin, producer_config, share_consumer_config
from agl_events.log.kafka_config import (
    CONFIG_FILE_ENV,
    REDACTED,
    KafkaConfigError,
    aiokafka_security,
    config_from_environ,
    parse_config_file,
    redacted,
)
from agl_events.processors.app import faust_credentials

PASSWORD = "s3cr3t-pa55"
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "agl",
        "sasl.password": PASSWORD}


@pytest.fixture
def no_kafka_config(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No connection settings from the environment the tests run in."""
    monkeypatch.delenv(CONFIG_FILE_ENV, raising=False)
    for name in [n for n in os.environ if n.startswith("AGL_KAFKA_CONF_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_properties_and_json_files(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("# a comment\n! another\n\nsecurity.protocol=SASL_SSL\nsasl.mechanism : SCRAM-SHA-512\n"
                          f"sasl.password={PASSWORD}=with=equals\n")
    assert parse_config_file(properties) == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                             "sasl.password": f"{PASSWORD}=with=equals"}
    json_file = tmp_path / "client.json"
    json_file.write_text('{"security.protocol": "SSL", "enable.ssl.certificate.verification": false, '
                         '"socket.timeout.ms": 5000}')
    assert parse_config_file(json_file) == {"security.protocol": "SSL", "enable.ssl.certificate.verification":
                                            "false", "socket.timeout.ms": "5000"}


def test_variables_name_properties_and_win_over_the_file(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nsasl.username=from-file\n")
    environ = {CONFIG_FILE_ENV: str(config), "AGL_KAFKA_CONF_SECURITY_PROTOCOL": "SASL_SSL",
               "AGL_KAFKA_CONF_SASL_PASSWORD": PASSWORD,
               # agl-events' own settings share the AGL_KAFKA_ start but are not librdkafka's:
               "AGL_KAFKA_BOOTSTRAP": "k:9092", "AGL_KAFKA_TIMEOUT": "3", "AGL_KAFKA_PORT": "1", "AGL_KAFKA_CONF_": "x"}
    assert config_from_environ(environ) == {"security.protocol": "SASL_SSL", "sasl.username": "from-file",
                                            "sasl.password": PASSWORD}


def test_every_client_gets_the_settings_under_its_own(no_kafka_config: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in SASL.items()) + "acks=0\nisolation.level=read_uncommitted\n"
                      "bootstrap.servers=elsewhere:9092\n")
    no_kafka_config.setenv(CONFIG_FILE_ENV, str(config))
    no_kafka_config.setenv("AGL_KAFKA_CONF_SSL_CA_LOCATION", "/etc/ca.pem")
    built = {"producer": producer_config("b:9092", "p"), "consumer": consumer_config("b:9092", "g"),
             "admin": admin_config("b:9092"), "share consumer": share_consumer_config("b:9092", "g")}
    for kind, found in built.items():
        assert {k: found[k] for k in SASL} == SASL, kind
        assert found["ssl.ca.location"] == "/etc/ca.pem", kind
        assert found["bootstrap.servers"] == "b:9092", kind  # ours win: a file cannot point clients elsewhere
    assert built["producer"]["acks"] == "all" and built["producer"]["enable.idempotence"] is True
    assert built["consumer"]["isolation.level"] == "read_committed"
    assert producer_config("b:9092", "p", **{"sasl.username": "caller"})["sasl.username"] == "caller"


def test_secrets_are_redacted() -> None:
    config = {**SASL, "ssl.key.password": "k", "sasl.jaas.config": "x password=y", "ssl.keystore.password": "k",
              "sasl.oauthbearer.client.secret": "c", "sasl.oauthbearer.config": "c", "ssl.key.pem": "pem",
              "ssl.key.location": "/key.pem", "ssl.ca.location": "/ca.pem"}
    shown = redacted(config)
    assert PASSWORD not in repr(shown)
    assert {k for k, v in shown.items() if v == REDACTED} == {
        "sasl.password", "ssl.key.password", "sasl.jaas.config", "ssl.keystore.password",
        "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "ssl.key.pem"}
    assert shown["security.protocol"] == "SASL_PLAINTEXT" and shown["ssl.key.location"] == "/key.pem"


def test_unreadable_settings_are_named_without_their_values(tmp_path: Path) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text(f"security.protocol=SSL\n{PASSWORD}\n")
    with pytest.raises(KafkaConfigError, match="line 2: expected name=value") as raised:
        parse_config_file(bad)
    assert PASSWORD not in str(raised.value)
    bad.write_text(f'{{"sasl.password": "{PASSWORD}",}}')
    with pytest.raises(KafkaConfigError, match="not valid JSON") as raised:
        parse_config_file(bad)
    assert PASSWORD not in str(raised.value)


def test_aiokafka_and_faust_get_the_same_settings() -> None:
    assert aiokafka_security({}) == {} and faust_credentials({}) is None
    scram = {**SASL, "sasl.mechanism": "SCRAM-SHA-256"}
    found = aiokafka_security(scram)
    assert found == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
                     "sasl_plain_username": "agl", "sasl_plain_password": PASSWORD}
    credentials = faust_credentials(scram)
    assert credentials is not None and PASSWORD not in repr(credentials)
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth
    assert credentials_to_aiokafka_auth(credentials) == {**found, "ssl_context": None}
    tls = aiokafka_security({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"})
    assert tls["security_protocol"] == "SSL" and tls["ssl_context"].check_hostname is False
    assert credentials_to_aiokafka_auth(faust_credentials({"security.protocol": "SSL"}))["security_protocol"] == "SSL"
    with pytest.raises(KafkaConfigError, match="GSSAPI"):
        aiokafka_security({"security.protocol": "SASL_SSL", "sasl.mechanisms": "GSSAPI"})


@pytest.mark.kafka
def test_settings_reach_a_real_client(no_kafka_config: pytest.MonkeyPatch, bootstrap: str) -> None:
    """The test broker speaks PLAINTEXT: a harmless setting keeps the client working, SASL makes it fail, and the
    failure does not show the password."""
    no_kafka_config.setenv("AGL_KAFKA_CONF_SOCKET_KEEPALIVE_ENABLE", "true")
    assert make_admin(bootstrap).list_topics(timeout=10).brokers
    for name, value in SASL.items():
        no_kafka_config.setenv("AGL_KAFKA_CONF_" + name.upper().replace(".", "_"), value)
    with pytest.raises(KafkaUnreachableError) as raised:
        require_reachable(bootstrap, timeout=2)
    assert PASSWORD not in str(raised.value)


@pytest.mark.kafka
def test_kafka_status_shows_the_settings_in_use_without_secrets(tmp_path: Path, bootstrap: str) -> None:
    config = tmp_path / "client.json"
    config.write_text('{"socket.keepalive.enable": true}')
    done = subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", bootstrap, "--kafka-config", str(config),
                           "kafka", "status"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "AGL_KAFKA_CONF_SSL_KEY_PASSWORD": PASSWORD})
    assert done.returncode == 0, done.stderr
    assert "connection settings: socket.keepalive.enable=true, ssl.key.password=[redacted]" in done.stdout
    assert PASSWORD not in done.stdout + done.stderr


def test_the_cli_option_reports_a_broken_file_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "client.properties"
    bad.write_text(f"{PASSWORD}\n")
    done = subprocess.run([sys.executable, "-m", "agl_events", "--kafka-config", str(bad), "topics", "describe"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "line 1: expected name=value" in done.stderr and PASSWORD not in done.stderr + done.stdout
