"""A local broker that demands what a production cluster does: TLS on the wire, SASL/SCRAM-SHA-512 logins, ACLs.

The plain local broker (`broker.local`) speaks PLAINTEXT and lets anyone do anything, so `--kafka-config` (the
SASL/SSL settings every client of ours takes, `log.kafka_config`) would never meet a broker that checks them. This
one is the same KRaft process with its client listener turned into SASL_SSL, for tests and for trying a secured
setup on one machine:

- **certificates** (`make_certificates`): a throwaway CA and a broker certificate for `localhost`/`127.0.0.1`,
  made with `cryptography`, written as PEM (Kafka reads PEM keystores: `ssl.keystore.type=PEM`);
- **users** (`SecureBroker.format_options`): SCRAM-SHA-512 credentials written into the metadata log when the
  storage is formatted (KIP-900), so the broker's own inter-broker login exists before it first starts;
- **listeners** (`secure_properties`): clients on SASL_SSL; the KRaft controller on TLS with client
  certificates (SCRAM cannot guard the controller listener: its credentials live in the metadata the controller
  serves), so the broker's certificate is its principal there;
- **ACLs** (`Grant`, `ROLE_GRANTS`): KRaft's StandardAuthorizer, `admin` and the broker's certificate as super
  users, nothing allowed to anyone else unless granted. The grants each of our processes needs are data here
  (docs/security.md lists them); `log.acls.grant` writes them.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from agl_events.broker.local import LocalBroker
from agl_events.config import Settings
from agl_events.log.acls import Grant, create_acls
from agl_events.log.clients import LogError, make_admin
from agl_events.proc.ports import port_accepts

SCRAM_MECHANISM = "SCRAM-SHA-512"
#: The super user: the broker logs in as it between its own listeners, and it grants everyone else's ACLs.
ADMIN = "admin"
#: The broker certificate's subject: its principal on the controller listener (mutual TLS), a super user.
BROKER_SUBJECT = "agl-events-broker"
#: Names the certificates are valid for: what the local broker's clients connect to.
HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the CA clients trust (`ssl.ca.location`), and the broker's key with its chain (a keystore)."""

    ca: Path
    keystore: Path


def make_certificates(folder: Path, hosts: tuple[str, ...] = HOSTS, days: int = 30) -> TlsFiles:
    """A new CA and a broker certificate it signed for `hosts`, under `folder`; the CA's key is not kept.

    EC P-256 keys: generated in milliseconds, and every TLS stack here (the JVM, librdkafka's OpenSSL, Python's ssl
    for the faust workers) takes them. The broker's certificate serves as a client certificate too (its login to
    the controller listener).
    """
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agl-events test CA")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [_general_name(host) for host in hosts]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, BROKER_SUBJECT)]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(ca=folder / "ca.pem", keystore=folder / "broker.pem")
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())  # unencrypted PKCS#8: Kafka 3.3+ reads it
    files.keystore.write_bytes(key_pem + cert.public_bytes(serialization.Encoding.PEM) +
                               ca_cert.public_bytes(serialization.Encoding.PEM))
    files.keystore.chmod(0o600)
    return files


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def secure_properties(port: int, controller_port: int, tls: TlsFiles, admin_password: str) -> dict[str, str]:
    """The broker settings that replace the template's PLAINTEXT listeners (appended to server.properties: the
    last value of a key wins)."""
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{ADMIN}" '
            f'password="{admin_password}";')
    return {
        "listeners": f"SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "listener.security.protocol.map": "CONTROLLER:SSL,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
        "listener.name.controller.ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN};User:CN={BROKER_SUBJECT}",
        "allow.everyone.if.no.acl.found": "false",
    }


def client_properties(username: str, password: str, ca: Path) -> dict[str, str]:
    """What a client of this broker puts in its `--kafka-config` file."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": username,
            "sasl.password": password, "ssl.ca.location": str(ca)}


def write_properties_file(path: Path, properties: Mapping[str, str]) -> Path:
    """`properties` as a Java-style .properties file (readable by `--kafka-config`), only for its owner."""
    path.write_text("".join(f"{name}={value}\n" for name, value in properties.items()))
    path.chmod(0o600)
    return path


class SecureBroker(LocalBroker):
    """The local broker with SASL_SSL clients, SCRAM users `users` (name -> password; `admin` is added) and ACLs.

    Its files live under `<settings.home>/kafka` as the plain broker's do, the certificates in `kafka/tls`.
    """

    def __init__(self, settings: Settings, users: Mapping[str, str]) -> None:
        super().__init__(settings)
        self.users = {ADMIN: secrets.token_urlsafe(18), **users}
        self.tls = TlsFiles(ca=self.kafka_dir / "tls" / "ca.pem", keystore=self.kafka_dir / "tls" / "broker.pem")

    def client_config(self, username: str) -> dict[str, str]:
        """The librdkafka settings that log `username` in (`--kafka-config`)."""
        return client_properties(username, self.users[username], self.tls.ca)

    def write_properties(self) -> None:
        super().write_properties()
        if not self.tls.keystore.exists():
            self.tls = make_certificates(self.tls.keystore.parent)
        extra = secure_properties(self.settings.local_port, self.settings.local_controller_port, self.tls,
                                  self.users[ADMIN])
        with self.properties_file.open("a") as out:
            out.write("\n# SASL_SSL listeners, SCRAM logins and ACLs (agl_events/broker/secure.py): these lines win\n")
            out.writelines(f"{name}={value}\n" for name, value in extra.items())

    def format_options(self) -> list[str]:
        """Every user's SCRAM credentials, into the metadata log as the storage is formatted."""
        options = []
        for name, password in self.users.items():
            options += ["--add-scram", f"{SCRAM_MECHANISM}=[name={name},password={password}]"]
        return options

    def is_ready(self, timeout: float = 2.0) -> bool:
        """The broker answers a metadata request from `admin` over SASL_SSL."""
        if not port_accepts(self.settings.local_port):
            return False
        try:
            admin = make_admin(self.bootstrap, log_level=0, **self.client_config(ADMIN))
            return bool(admin.list_topics(timeout=timeout).brokers)
        except LogError:
            return False


    def grant(self, username: str, grants: Iterable[Grant]) -> int:
        """Allow `username` `grants` (`roles.role_grants` has our processes'), as `admin`; returns the ACL count."""
        admin = make_admin(self.bootstrap, **self.client_config(ADMIN))
        return create_acls(admin, f"User:{username}", grants)
