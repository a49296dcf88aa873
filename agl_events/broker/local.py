"""The embedded default broker: one local Apache Kafka process in KRaft combined mode.

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
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from agl_events.broker.reach import require_reachable
from agl_events.config import PROJECT_ROOT, Settings, data_dir
from agl_events.log.clients import make_admin

#: Where the Maven project, the configuration template and the log4j configuration live: deploy/kafka/
#: in a checkout, agl_events/_kafka in an installed package.
DEPLOY_DIR = data_dir("_kafka", "deploy/kafka")
POM_FILE = DEPLOY_DIR / "pom.xml"
TEMPLATE_FILE = DEPLOY_DIR / "server.properties.template"
LOG4J_CONFIG_FILE = DEPLOY_DIR / "log4j2.yaml"
#: Kafka's runtime class path in a checkout, shared by all its homes; `make` fetches it there (see pom.xml).
#: None for an installed package, whose site-packages is no place for downloads: each home fetches its own.
LIBS_DIR: Path | None = DEPLOY_DIR / "target" / "libs" if PROJECT_ROOT is not None else None

#: Main classes inside kafka_2.13-*.jar (verified against Kafka 4.3.1).
KAFKA_MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"
#: Kafka 4.x brokers require Java 17.
MIN_JAVA_VERSION = 17
#: A development broker needs little memory; the default heap would claim a quarter of the machine.
JVM_HEAP_OPTIONS = ("-Xms256m", "-Xmx1g")
#: How many log lines an error message about a failed start quotes.
FAILURE_LOG_LINES = 20

_INSTALL_HINT = (
    "Install Java 17 or newer and Maven (e.g. `apt install openjdk-17-jre-headless maven` or "
    "`brew install openjdk@17 maven`), or point AGL_KAFKA_BOOTSTRAP at an existing Kafka cluster."
)

#: Broker processes this Python process started, so that it can reap them once they exit
#: (otherwise they linger as zombies that still look alive to `kill -0`).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class BrokerError(RuntimeError):
    """The local broker cannot be fetched, started or stopped; the message says what to do."""


class BrokerStatus(BaseModel):
    """What `start`, `stop` and `status` report about the local broker."""

    running: bool
    #: The process answers Kafka requests (False while it is still starting up).
    ready: bool = False
    pid: int | None = None
    bootstrap: str
    data_dir: Path
    log_file: Path
    message: str = ""


class LocalBroker:
    """Manages the single-node broker whose files live under `<settings.home>/kafka`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Absolute: the JVM runs in kafka_dir, and the pid check compares command lines.
        self.kafka_dir = settings.home.expanduser().absolute() / "kafka"
        self.data_dir = self.kafka_dir / "data"
        self.log_dir = self.kafka_dir / "logs"
        self.log_file = self.log_dir / "server.log"
        self.stdout_file = self.log_dir / "stdout.log"
        self.pid_file = self.kafka_dir / "broker.pid"
        self.cluster_id_file = self.kafka_dir / "cluster.id"
        self.properties_file = self.kafka_dir / "server.properties"
        self.lock_file = self.kafka_dir / ".lock"
        #: Size of server.log when this object last launched the broker: where its output begins.
        self._log_start = 0

    # ------------------------------------------------------------------ public API

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers clients use to reach this broker."""
        return f"localhost:{self.settings.local_port}"

    @property
    def libs_dir(self) -> Path:
        """Kafka's runtime class path, as downloaded by Maven."""
        return LIBS_DIR if LIBS_DIR is not None else self.kafka_dir / "libs"

    def fetch(self) -> Path:
        """Download Kafka's jars with Maven unless they are already there; returns `libs_dir`.

        Maven rather than a tarball download because it verifies checksums, caches in ~/.m2 (a second
        home copies from there without downloading) and pins every version in one reviewed file
        (deploy/kafka/pom.xml). Maven fills a staging folder that is renamed at the end, so an interrupted
        download never leaves a class path that has Kafka's jar but lacks others.
        """
        libs_dir = self.libs_dir
        if _has_kafka_jar(libs_dir):
            return libs_dir
        find_java()
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BrokerError(
                f"Kafka's jars are not in {libs_dir}, and Maven (`mvn`) is needed once to download them. "
                f"{_INSTALL_HINT}"
            )
        print(f"Fetching Apache Kafka's jars with Maven into {libs_dir} (once; about a minute when ~/.m2 "
              "does not have them yet)...", file=sys.stderr, flush=True)
        libs_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".libs-", dir=libs_dir.parent))
        try:
            command = [mvn, "-q", "-B", "-f", str(POM_FILE), f"-Dagl.kafka.libs={staging}",
                       "dependency:copy-dependencies"]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0 or not _has_kafka_jar(staging):
                output = _last_lines((result.stdout + result.stderr).splitlines(), FAILURE_LOG_LINES)
                raise BrokerError(
                    f"downloading Kafka with Maven failed (exit code {result.returncode}): "
                    f"{' '.join(command)}\n{output}"
                )
            shutil.rmtree(libs_dir, ignore_errors=True)  # jars of an interrupted `make`, say
            staging.rename(libs_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return libs_dir

    def start(self, timeout: float = 60.0) -> BrokerStatus:
        """Start the broker in the background and wait until it answers; harmless when running."""
        self.kafka_dir.mkdir(parents=True, exist_ok=True)
        with self._locked():
            notes: list[str] = []
            pid = self._live_pid(notes)
            if pid is not None:
                self._wait_until_ready(pid, timeout, started_now=False)
                return self._report(pid, _join("already running", *notes), ready=True)
            self._check_ports_free()
            java = find_java()
            self.fetch()
            self._write_properties()
            self._format_storage(java)
            pid = self._spawn(java)
            self._wait_until_ready(pid, timeout, started_now=True)
            return self._report(pid, _join("started", *notes), ready=True)

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
            _signal(pid, signal.SIGTERM)
            if not wait_for_exit(pid, timeout):
                _signal(pid, signal.SIGKILL)
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
        yield from _follow_file(self.log_file, poll_interval)

    def is_ready(self, timeout: float = 2.0) -> bool:
        """The broker accepts connections and returns cluster metadata with at least one broker."""
        return probe(self.bootstrap, timeout, port=self.settings.local_port)

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
            (self.settings.local_port, "AGL_KAFKA_PORT"),
            (self.settings.local_controller_port, "AGL_KAFKA_CONTROLLER_PORT"),
        ):
            if port_free(port):
                continue
            holder = "another program"
            if port == self.settings.local_port and probe(self.bootstrap, 2.0, port=port):
                holder = "another Kafka broker"
            raise BrokerError(
                f"port {port} on localhost is already in use by {holder} (not the local broker of "
                f"{self.settings.home}), so Kafka cannot listen there. Stop it, or pick another port "
                f"with {variable}=<port> (e.g. `export {variable}={_other_port(port)}`)."
            )

    def _write_properties(self) -> None:
        """Render the template; rewritten at every start so port changes take effect."""
        data_dir = str(self.data_dir).replace("\\", "\\\\")  # a backslash escapes in .properties
        text = TEMPLATE_FILE.read_text().format(
            port=self.settings.local_port,
            controller_port=self.settings.local_controller_port,
            data_dir=data_dir,
        )
        self.properties_file.write_text(text)

    def _format_storage(self, java: str) -> None:
        """Format the data directory once (KRaft requires it), as a standalone dynamic quorum."""
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id = self._cluster_id(java)
        self._run_tool(
            java,
            "format", "--standalone", "--ignore-formatted",
            "--cluster-id", cluster_id, "--config", str(self.properties_file),
        )  # fmt: skip

    def _cluster_id(self, java: str) -> str:
        """The cluster id of this home, generated by Kafka on first use and then kept."""
        if self.cluster_id_file.exists():
            return self.cluster_id_file.read_text().strip()
        cluster_id = self._run_tool(java, "random-uuid").strip().splitlines()[-1]
        self.cluster_id_file.write_text(cluster_id + "\n")
        return cluster_id

    def _run_tool(self, java: str, *arguments: str) -> str:
        """Run Kafka's StorageTool and return its stdout, turning failures into BrokerError."""
        command = [java, *self._jvm_system_properties(), "-cp", self._class_path(), STORAGE_TOOL_CLASS]
        result = subprocess.run([*command, *arguments], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = _last_lines((result.stdout + result.stderr).splitlines(), FAILURE_LOG_LINES)
            code = result.returncode
            raise BrokerError(f"kafka-storage {arguments[0]} failed (exit code {code}):\n{output}")
        return result.stdout

    def _spawn(self, java: str) -> int:
        """Launch the JVM detached (own session) so it outlives the command that started it."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        command = [
            java, *JVM_HEAP_OPTIONS, "-Djava.awt.headless=true", *self._jvm_system_properties(),
            "-cp", self._class_path(), KAFKA_MAIN_CLASS, str(self.properties_file),
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
        _CHILDREN[process.pid] = process
        self.pid_file.write_text(f"{process.pid}\n")
        return process.pid

    def _jvm_system_properties(self) -> list[str]:
        return [f"-Dkafka.logs.dir={self.log_dir}", f"-Dlog4j2.configurationFile={LOG4J_CONFIG_FILE}"]

    def _class_path(self) -> str:
        return str(self.libs_dir / "*")  # the JVM expands the wildcard itself

    def _wait_until_ready(self, pid: int, timeout: float, *, started_now: bool) -> None:
        """Poll until the broker answers; a process that dies meanwhile is reported with its log."""
        deadline = time.monotonic() + timeout
        while True:
            if not process_alive(pid):
                self.pid_file.unlink(missing_ok=True)
                excerpt = self._log_excerpt()
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
            f"{self._log_excerpt()}"
        )

    def _log_excerpt(self) -> str:
        """Kafka's errors since this start, then the end of server.log and of the JVM's stdout.

        The cause of a failed start (say, a port that is taken) is logged as an ERROR followed by a
        hundred lines of orderly shutdown, so the last lines alone would miss it.
        """
        parts = []
        errors = _error_lines(_read_from(self.log_file, self._log_start), FAILURE_LOG_LINES)
        if errors:
            parts.append(f"--- errors in {self.log_file} ---\n" + "\n".join(errors))
        for path in (self.log_file, self.stdout_file):
            lines = tail_file(path, FAILURE_LOG_LINES)
            if lines:
                parts.append(f"--- last lines of {path} ---\n" + "\n".join(lines))
        return "\n".join(parts) or f"(no log output in {self.log_dir})"

    def _report(self, pid: int | None, message: str, *, ready: bool | None = None) -> BrokerStatus:
        """A status for `pid` (None: not running), probing readiness unless already known."""
        if ready is None:
            ready = pid is not None and self.is_ready()
        return BrokerStatus(
            running=pid is not None,
            ready=ready,
            pid=pid,
            bootstrap=self.bootstrap,
            data_dir=self.data_dir,
            log_file=self.log_file,
            message=message,
        )


def ensure_broker(settings: Settings, timeout: float = 60.0) -> str:
    """The bootstrap servers to use, starting the local broker first if it is the one in use.

    Every agl-events command calls this, so a configured remote cluster is never second-guessed
    (nothing is started, it is only asked once whether it answers, within `settings.kafka_timeout`)
    and the local broker is started at most once.
    """
    if not settings.uses_local_broker:
        require_reachable(settings.bootstrap_servers, settings.kafka_timeout)
        return settings.bootstrap_servers
    LocalBroker(settings).start(timeout=timeout)
    return settings.bootstrap_servers


def probe(bootstrap: str, timeout: float = 2.0, *, port: int | None = None) -> bool:
    """Whether a Kafka cluster answers a metadata request at `bootstrap` within `timeout` s.

    With `port` given, a plain TCP connect is tried first so that an unstarted local broker is
    detected instantly and without librdkafka's connection-refused log lines.
    """
    if port is not None and not _port_accepts(port):
        return False
    admin = make_admin(bootstrap, log_level=0)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:  # KafkaException on timeout/transport errors: "not reachable"
        return False
    return bool(metadata.brokers)


def find_java() -> str:
    """The `java` executable (JAVA_HOME first), checked to be at least Java 17."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    java = str(candidate) if candidate and candidate.exists() else shutil.which("java")
    if java is None:
        raise BrokerError(f"Java (`java`) is needed to run the local Kafka broker. {_INSTALL_HINT}")
    version = _java_major_version(java)
    if version is not None and version < MIN_JAVA_VERSION:
        raise BrokerError(f"{java} is Java {version}; Kafka needs Java {MIN_JAVA_VERSION}+. {_INSTALL_HINT}")
    return java


def _has_kafka_jar(libs_dir: Path) -> bool:
    return any(libs_dir.glob("kafka_2.13-*.jar"))


def _java_major_version(java: str) -> int | None:
    """Parse `java -version` ("1.8.0_392" is 8, "17.0.15" is 17); None when unrecognisable."""
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


# ---------------------------------------------------------------------- process helpers (agl-events up uses them too)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created) held by this process for the block, across processes."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def process_alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (an exited process nobody has reaped yet)."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, but belongs to someone else
        return True
    if not _is_zombie(pid):
        return True
    if child is not None:  # it died after the poll above: reap it now
        child.poll()
        _CHILDREN.pop(pid, None)
    return False


def _is_zombie(pid: int) -> bool:
    """All threads of `pid` have exited (Linux /proc); False where that cannot be read."""
    try:
        stats = [(task / "stat").read_text() for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return False
    # The state follows the parenthesised command name, which may itself contain ")".
    return all(stat.rsplit(")", 1)[-1].split()[0] == "Z" for stat in stats)


def command_line(pid: int) -> str | None:
    """The command line of `pid` from /proc (Linux) or `ps` (macOS); None when unavailable."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    ps = shutil.which("ps")
    if ps is None:
        return None
    command = [ps, "-o", "command=", "-p", str(pid)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    return result.stdout if result.returncode == 0 else None


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def wait_for_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def port_free(port: int) -> bool:
    """Whether we could listen on localhost:`port` (SO_REUSEADDR, as the JVM binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _other_port(port: int) -> int:
    """A port number to suggest instead of a taken one."""
    return port + 10000 if port < 55000 else port - 10000


def _port_accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
        return True
    return False


# ---------------------------------------------------------------------- log helpers


def tail_file(path: Path, n: int, block_size: int = 65536) -> list[str]:
    """The last `n` lines of `path`, reading backwards so a 50 MB log costs one block or two."""
    if n <= 0 or not path.exists():
        return []
    with path.open("rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        data = b""
        position = end
        while position > 0 and data.count(b"\n") <= n:
            position = max(0, position - block_size)
            handle.seek(position)
            data = handle.read(end - position)
    return data.decode(errors="replace").splitlines()[-n:]


def _follow_file(path: Path, poll_interval: float) -> Iterator[str]:
    """`tail -F`: yield new lines, reopening the file when it is rotated or recreated."""
    handle = None
    inode = None
    from_end = True  # only the file as it is now is skipped; a new or rotated one is read whole
    try:
        while True:
            if handle is None and path.exists():
                handle = path.open("r", errors="replace")
                inode = os.fstat(handle.fileno()).st_ino
                if from_end:
                    handle.seek(0, os.SEEK_END)
            from_end = False
            line = handle.readline() if handle is not None else ""
            if line:
                yield line.rstrip("\n")
                continue
            if handle is not None and _rotated(path, inode, handle.tell()):
                handle.close()
                handle = None
                continue
            time.sleep(poll_interval)
    finally:
        if handle is not None:
            handle.close()


def _rotated(path: Path, inode: int | None, position: int) -> bool:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    return stat.st_ino != inode or stat.st_size < position


def _read_from(path: Path, offset: int, limit: int = 4 << 20) -> list[str]:
    """The lines of `path` after byte `offset` (at most the last `limit` bytes of them)."""
    if not path.exists():
        return []
    with path.open("rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        start = offset if offset <= end else 0  # the log rolled over meanwhile
        handle.seek(max(start, end - limit))
        return handle.read().decode(errors="replace").splitlines()


def _error_lines(lines: list[str], limit: int) -> list[str]:
    """ERROR/FATAL records with their exception messages ("Caused by: ..."), minus stack frames."""
    picked: list[str] = []
    in_error = False
    for line in lines:
        if line.startswith("["):
            in_error = "] ERROR " in line or "] FATAL " in line
            if in_error:
                picked.append(line)
        elif in_error and line.strip() and not line.lstrip().startswith(("at ", "...")):
            picked.append(line)
    return picked[:limit]


def _last_lines(lines: list[str], n: int) -> str:
    return "\n".join(deque(lines, maxlen=n))


def _join(first: str, *notes: str) -> str:
    return "; ".join((first, *notes))
