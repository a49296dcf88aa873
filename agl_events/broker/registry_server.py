"""A local Confluent-compatible Schema Registry: Apicurio Registry, fetched from Maven Central, for tests and
development.

Confluent's own registry is on neither Maven Central nor PyPI, and Karapace (Aiven's) is not on PyPI either;
Apicurio Registry is on Maven Central and serves Confluent's REST API under `/apis/ccompat/v7`, which
confluent-kafka's `SchemaRegistryClient` and its serializers use unchanged. Its Quarkus build (the runner jar and
lib/) is unpacked by Maven (deploy/registry/pom.xml) into `deploy/registry/target/apicurio` of a checkout, or
`<home>/registry/apicurio` of an installed package, once. Version 2.6 because 3.x needs Java 21 and the broker
needs only 17. Storage is Apicurio's in-memory database: a stopped registry forgets its schemas, which suits
tests and a development loop (`agl-events schemas register` puts ours back).

    <home>/registry/registry.pid   pid of the running JVM and its port
    <home>/registry/registry.log   its output
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from agl_events.broker.install import FAILURE_LOG_LINES, BrokerError, find_java, last_lines
from agl_events.config import PROJECT_ROOT, data_dir
from agl_events.proc.locks import file_lock
from agl_events.proc.logs import tail_file
from agl_events.proc.pids import command_line, process_alive, send_signal, track, wait_for_exit
from agl_events.proc.ports import port_free

DEPLOY_DIR = data_dir("_registry", "deploy/registry")
POM_FILE = DEPLOY_DIR / "pom.xml"
#: Where the checkout keeps the unpacked registry, shared by all its homes; None for an installed package.
CHECKOUT_DIST_DIR: Path | None = DEPLOY_DIR / "target" / "apicurio" if PROJECT_ROOT is not None else None
RUNNER_JAR_GLOB = "apicurio-registry-app-*-runner.jar"
#: Where Apicurio serves Confluent's API (v7: what confluent-kafka 2.x speaks).
CCOMPAT_PATH = "/apis/ccompat/v7"
#: Confluent's default port, so that examples written for Confluent's registry read the same.
DEFAULT_PORT = 8081
#: The JVM's options: a heap for an idle Apicurio (about 150 MB; the default, a quarter of the machine, is far
#: more), one GC thread, and the quick JIT only: its start then costs 3.4 s of CPU instead of 6.5-7.4 (a test
#: registry starts once per module on a machine that runs the test broker too; answering schema requests needs
#: no optimised code).
JVM_OPTIONS = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class RegistryError(BrokerError):
    """The local registry cannot be fetched, started or stopped; the message says what to do."""


def fetch_registry(dist_dir: Path) -> Path:
    """Unpack Apicurio Registry with Maven into `dist_dir` unless it is there; returns its runner jar.

    Maven (rather than a download of our own) verifies checksums and caches the 140 MB archive in ~/.m2, so a
    second checkout or home unpacks without downloading. It unpacks into a staging folder renamed at the end, so
    an interrupted fetch never leaves a jar without its lib/.
    """
    found = _runner_jar(dist_dir)
    if found is not None:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RegistryError(f"Apicurio Registry is not in {dist_dir}, and Maven (`mvn`) is needed once to fetch it.")
    print(f"Fetching Apicurio Registry (a Confluent-compatible Schema Registry) with Maven into {dist_dir} (once; "
          "a 140 MB download when ~/.m2 does not have it yet)...", file=sys.stderr, flush=True)
    dist_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".apicurio-", dir=dist_dir.parent))
    try:
        command = [mvn, "-q", "-B", "-f", str(POM_FILE), f"-Dagl.registry.dir={staging}", "dependency:unpack"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0 or _runner_jar(staging) is None:
            output = last_lines((result.stdout + result.stderr).splitlines(), FAILURE_LOG_LINES)
            raise RegistryError(f"fetching Apicurio Registry with Maven failed (exit code {result.returncode}): "
                                f"{' '.join(command)}\n{output}")
        shutil.rmtree(dist_dir, ignore_errors=True)
        staging.rename(dist_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    jar = _runner_jar(dist_dir)
    assert jar is not None
    return jar


def _runner_jar(dist_dir: Path) -> Path | None:
    return next(iter(sorted(dist_dir.glob(RUNNER_JAR_GLOB))), None)


class RegistryServer:
    """The registry of one home, on loopback port `port`: started detached (it outlives the command that started
    it, as the broker does) and found again by its pid file."""

    def __init__(self, home: Path, port: int = DEFAULT_PORT) -> None:
        self.dir = home.expanduser().absolute() / "registry"
        self.port = port
        self.pid_file = self.dir / "registry.pid"
        self.log_file = self.dir / "registry.log"
        self.lock_file = self.dir / ".lock"
        self.dist_dir = CHECKOUT_DIST_DIR or self.dir / "apicurio"

    @property
    def url(self) -> str:
        """What `--schema-registry` / AGL_SCHEMA_REGISTRY_URL and confluent-kafka's clients take."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    def start(self, timeout: float = 120.0) -> str:
        """Start it unless it runs, and wait until it answers Confluent's API; returns its URL."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.lock_file):
            pid = self.pid()
            if pid is None:
                if not port_free(self.port):
                    raise RegistryError(f"port {self.port} on localhost is already in use by another program, so the "
                                        "registry cannot listen there: pick another with --port.")
                pid = self._spawn(find_java(), fetch_registry(self.dist_dir))
            self._wait_until_ready(pid, timeout)
        return self.url

    def stop(self, timeout: float = 30.0) -> int | None:
        """Stop it (SIGTERM, SIGKILL after `timeout` s); returns the pid it had, None when none ran."""
        if not self.dir.is_dir():
            return None
        with file_lock(self.lock_file):
            pid = self.pid()
            if pid is not None:
                send_signal(pid, signal.SIGTERM)
                if not wait_for_exit(pid, timeout):
                    send_signal(pid, signal.SIGKILL)
                    wait_for_exit(pid, 10.0)
                self.pid_file.unlink(missing_ok=True)
        return pid

    def pid(self) -> int | None:
        """The pid of this home's running registry (and `port` becomes the one it listens on); a pid file whose
        process is gone (or is another program now) is removed."""
        try:
            fields = self.pid_file.read_text().split()
        except FileNotFoundError:
            return None
        if len(fields) == 2 and all(f.isdigit() for f in fields) and process_alive(int(fields[0])) \
                and self._is_ours(int(fields[0])):
            self.port = int(fields[1])
            return int(fields[0])
        self.pid_file.unlink(missing_ok=True)
        return None

    def answers(self) -> bool:
        """Whether Confluent's API answers (a subject list, empty or not)."""
        try:
            return httpx.get(f"{self.url}/subjects", timeout=2.0).status_code == httpx.codes.OK
        except httpx.HTTPError:
            return False

    def _is_ours(self, pid: int) -> bool:
        running = command_line(pid)
        return running is None or f"-Dagl.registry.home={self.dir} " in running

    def _spawn(self, java: str, jar: Path) -> int:
        command = [
            java, *JVM_OPTIONS, f"-Dagl.registry.home={self.dir}",  # what `_is_ours` looks for
            f"-Dquarkus.http.port={self.port}", "-Dquarkus.http.host=127.0.0.1", "-jar", str(jar),
        ]  # fmt: skip
        with self.log_file.open("ab") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       cwd=self.dir, start_new_session=True)
        track(process)
        self.pid_file.write_text(f"{process.pid} {self.port}\n")
        return process.pid

    def _wait_until_ready(self, pid: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.answers():
            if not process_alive(pid):
                self.pid_file.unlink(missing_ok=True)
                raise RegistryError(f"the schema registry (pid {pid}) exited during startup:\n{self._log_tail()}")
            if time.monotonic() > deadline:
                raise RegistryError(f"the schema registry (pid {pid}) did not answer on {self.url} within "
                                    f"{timeout:g} s; it keeps running (`agl-events schemas registry stop` ends "
                                    f"it).\n{self._log_tail()}")
            time.sleep(0.25)

    def _log_tail(self) -> str:
        return "\n".join(tail_file(self.log_file, FAILURE_LOG_LINES)) or f"(nothing in {self.log_file})"
