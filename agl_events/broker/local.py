"""The embedded default broker: one local Apache Kafka process in KRaft combined mode (or one node of a local
cluster, `broker.cluster`).

Every agl-events command needs a Kafka cluster. When no bootstrap servers are configured the
commands use this broker instead, starting it on demand (`ensure_broker`), so that a fresh checkout
or a `pip install` works with nothing but Java and Maven installed. The broker runs in the background,
detached from the command that started it, and keeps its state under `<AGL_HOME>/kafka`:

    kafka/cluster.id          the cluster id the storage was formatted with
    kafka/server.properties   rendered from deploy/kafka/server.properties.template
    kafka/libs/               Kafka's jars, for an installed package (a checkout uses deploy/kafka/target/libs)
    kafka/broker.pid          pid of the running JVM
    kafka/data/               topic data and the KRaft metadata log
    kafka/logs/server.log     the broker's log (deploy/kafka/log4j2.yaml)
    kafka/logs/stdout.log     the JVM's own stdout/stderr (crashes before logging starts)
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from agl_events.broker.cluster import LocalCluster
from agl_events.broker.home import BrokerHome, BrokerStatus
from agl_events.broker.install import (
    KAFKA_MAIN_CLASS,
    BrokerError,
    fetch_jars,
    find_java,
)
from agl_events.broker.reach import require_reachable
from agl_events.config import Settings
from agl_events.log.clients import make_admin
from agl_events.proc.files import open_files
from agl_events.proc.locks import file_lock
from agl_events.proc.logs import follow_file, tail_file
from agl_events.proc.pids import command_line, process_alive, send_signal, track, wait_for_exit
from agl_events.proc.ports import port_accepts, port_free


class LocalBroker(BrokerHome):
    """Manages the single-node broker whose files live under `<settings.home>/kafka` (`BrokerHome`)."""

    # ------------------------------------------------------------------ public API

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers clients use to reach this broker."""
        return f"localhost:{self.node.port}"

    def fetch(self) -> Path:
        """Download Kafka's jars with Maven unless they are already there; returns `libs_dir`."""
        return fetch_jars(self.libs_dir)

    def start(self, timeout: float = 60.0) -> BrokerStatus:
        """Start the broker in the background and wait until it answers; harmless when running."""
        self.kafka_dir.mkdir(parents=True, exist_ok=True)
        with self._locked():
            notes: list[str] = []
            pid, started_now = self.launch(notes)
            self.wait_until_ready(pid, timeout, started_now=started_now)
            return self._report(pid, _join("started" if started_now else "already running", *notes), ready=True)

    def launch(self, notes: list[str]) -> tuple[int, bool]:
        """Spawn the JVM unless it runs, without waiting for it: (pid, whether started now). A cluster's nodes are
        all launched before any is waited for, since none answers before a majority of the quorum runs."""
        self.kafka_dir.mkdir(parents=True, exist_ok=True)
        pid = self._live_pid(notes)
        if pid is not None:
            return pid, False
        self._check_ports_free()
        java = find_java()
        self.fetch()
        self.write_properties()
        self.format_storage(java)
        return self._spawn(java), True

    def kill(self) -> int | None:
        """SIGKILL the running JVM, as a crashed machine would stop (chaos runs); returns its pid, None if none ran."""
        pid = self._live_pid([])
        if pid is not None:
            send_signal(pid, signal.SIGKILL)
            wait_for_exit(pid, 10.0)
            self.pid_file.unlink(missing_ok=True)
        return pid

    def stop(self, timeout: float = 30.0) -> BrokerStatus:
        """Stop the broker cleanly (SIGTERM), killing it after `timeout` s; harmless when stopped."""
        if not self.kafka_dir.is_dir():
            return self._report(None, "not running")
        with self._locked():
            notes: list[str] = []
            pid = self._live_pid(notes)
            if pid is None:
                return self._report(None, _join("not running", *notes))
            message = "stopped"
            send_signal(pid, signal.SIGTERM)
            if not wait_for_exit(pid, timeout):
                send_signal(pid, signal.SIGKILL)
                wait_for_exit(pid, 10.0)
                message = f"did not shut down within {timeout:g} s, killed"
            self.pid_file.unlink(missing_ok=True)
            return self._report(None, _join(f"{message} (pid {pid})", *notes))

    def status(self) -> BrokerStatus:
        """Whether the broker runs and answers; cleans up a stale pid file on the way."""
        notes: list[str] = []
        pid = self._live_pid(notes)
        if pid is None:
            return self._report(None, _join("not running", *notes))
        return self._report(pid, _join("running", *notes))

    def tail(self, n: int = 50) -> list[str]:
        """The last `n` lines of the broker's log (empty when it has never run)."""
        return tail_file(self.log_file, n)

    def follow(self, poll_interval: float = 0.5) -> Iterator[str]:
        """Yield lines appended to the log from now on, across log rotations; never returns."""
        yield from follow_file(self.log_file, poll_interval)

    def is_ready(self, timeout: float = 2.0) -> bool:
        """The broker accepts connections and returns cluster metadata with at least one broker."""
        return probe(self.bootstrap, timeout, port=self.node.port)

    # ------------------------------------------------------------------ pid bookkeeping

    def _live_pid(self, notes: list[str]) -> int | None:
        """The pid of our running broker, removing a pid file whose process is gone."""
        pid = self._read_pid()
        if pid is None:
            return None
        if process_alive(pid) and self._is_our_broker(pid):
            return pid
        self.pid_file.unlink(missing_ok=True)
        notes.append(f"removed stale pid file {self.pid_file} (process {pid} is gone)")
        return None

    def _read_pid(self) -> int | None:
        try:
            text = self.pid_file.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None

    def _is_our_broker(self, pid: int) -> bool:
        """Guards against pid reuse: the process must be Kafka running our properties file."""
        running = command_line(pid)
        if running is None:  # cannot tell (no /proc, no ps): trust the pid file
            return True
        return KAFKA_MAIN_CLASS in running and str(self.properties_file) in running

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialize start/stop across processes, e.g. two commands that both `ensure_broker`."""
        with file_lock(self.lock_file):
            yield

    # ------------------------------------------------------------------ starting

    def _check_ports_free(self) -> None:
        """Fail early, and clearly, when another program holds one of our ports."""
        for port, variable in (
            (self.node.port, "AGL_KAFKA_PORT"),
            (self.node.controller_port, "AGL_KAFKA_CONTROLLER_PORT"),
        ):
            if port_free(port):
                continue
            holder = "another program"
            if port == self.node.port and probe(self.bootstrap, 2.0, port=port):
                holder = "another Kafka broker"
            raise BrokerError(
                f"port {port} on localhost is already in use by {holder} (not the local broker of "
                f"{self.settings.home}), so Kafka cannot listen there. Stop it, or pick another port "
                f"with {variable}=<port> (e.g. `export {variable}={_other_port(port)}`)."
            )

    def _spawn(self, java: str) -> int:
        """Launch the JVM detached (own session) so it outlives the command that started it."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        command = [
            java, *self.heap_options(), "-Djava.awt.headless=true", *self.jvm_system_properties(),
            "-cp", self.class_path(), KAFKA_MAIN_CLASS, str(self.properties_file),
        ]  # fmt: skip
        with self.stdout_file.open("ab") as stdout:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                cwd=self.kafka_dir,  # where the JVM drops hs_err_pid*.log on a crash
                start_new_session=True,  # Ctrl-C in the terminal must not kill the broker
            )
        track(process)
        self.pid_file.write_text(f"{process.pid}\n")
        return process.pid

    def wait_until_ready(self, pid: int, timeout: float, *, started_now: bool) -> None:
        """Poll until the broker answers; a process that dies meanwhile is reported with its log."""
        deadline = time.monotonic() + timeout
        while True:
            if not process_alive(pid):
                self.pid_file.unlink(missing_ok=True)
                excerpt = self.log_excerpt()
                raise BrokerError(f"the Kafka broker (pid {pid}) exited during startup.\n{excerpt}")
            remaining = deadline - time.monotonic()
            if self.is_ready(timeout=max(0.5, min(2.0, remaining))):
                return
            if remaining <= 0:
                break
            time.sleep(0.25)
        what = "was started but" if started_now else "is running but"
        raise BrokerError(
            f"the Kafka broker (pid {pid}) {what} did not answer on {self.bootstrap} within "
            f"{timeout:g} s; it keeps running in the background (`agl-events kafka stop` ends it).\n"
            f"{self.log_excerpt()}"
        )

    def _report(self, pid: int | None, message: str, *, ready: bool | None = None) -> BrokerStatus:
        """A status for `pid` (None: not running), probing readiness unless already known."""
        if ready is None:
            ready = pid is not None and self.is_ready()
        files = open_files(pid) if pid is not None else None
        if files is not None and files.near_limit:
            message = _join(message, f"{files.used:,} of {files.limit:,} open files: at the limit the broker stops; "
                                     "delete experiments you no longer need (agl-events experiments delete NAME)")
        return BrokerStatus(
            running=pid is not None,
            ready=ready,
            pid=pid,
            bootstrap=self.bootstrap,
            data_dir=self.data_dir,
            log_file=self.log_file,
            message=message,
            open_files=files.used if files is not None else None,
            open_files_limit=files.limit if files is not None else None,
        )


def ensure_broker(settings: Settings, timeout: float = 60.0) -> str:
    """The bootstrap servers to use, starting the local broker (or the home's local cluster) first if in use.

    Every agl-events command calls this, so a configured remote cluster is never second-guessed
    (nothing is started, it is only asked once whether it answers, within `settings.kafka_timeout`)
    and the local broker is started at most once.
    """
    if not settings.uses_local_broker:
        require_reachable(settings.bootstrap_servers, settings.kafka_timeout)
        return settings.bootstrap_servers
    return local_cluster(settings).start(timeout=timeout).bootstrap


def local_cluster(settings: Settings, brokers: int | None = None) -> LocalCluster:
    """The local broker of `settings.home` as a cluster of `brokers` LocalBroker nodes (None: the home's size)."""
    return LocalCluster(settings, brokers, make_node=LocalBroker)


def probe(bootstrap: str, timeout: float = 2.0, *, port: int | None = None) -> bool:
    """Whether a Kafka cluster answers a metadata request at `bootstrap` within `timeout` s.

    With `port` given, a plain TCP connect is tried first so that an unstarted local broker is
    detected instantly and without librdkafka's connection-refused log lines.
    """
    if port is not None and not port_accepts(port):
        return False
    admin = make_admin(bootstrap, log_level=0)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:  # KafkaException on timeout/transport errors: "not reachable"
        return False
    return bool(metadata.brokers)


def _other_port(port: int) -> int:
    """A port number to suggest instead of a taken one."""
    return port + 10000 if port < 55000 else port - 10000



def _join(first: str, *notes: str) -> str:
    return "; ".join((first, *notes))
