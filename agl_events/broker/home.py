"""The files of a local Kafka node under `<AGL_HOME>/kafka` and how they are prepared before a start: the rendered
`server.properties`, the formatted KRaft storage and its cluster id, the JVM's class path, and the excerpt of its
logs that explains a failed start. `broker.local.LocalBroker` adds the lifecycle (start, stop, status).

The single default broker keeps its files in `kafka/` itself; node N of a local cluster (`broker.cluster`) in
`kafka/node-N/`, all of them sharing `kafka/cluster.id`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from agl_events.broker.install import (
    DEPLOY_DIR,
    FAILURE_LOG_LINES,
    LOG4J_CONFIG_FILE,
    STORAGE_TOOL_CLASS,
    TEMPLATE_FILE,
    BrokerError,
    error_lines,
    last_lines,
)
from agl_events.config import PROJECT_ROOT, Settings
from agl_events.proc.logs import read_from, tail_file
from agl_events.topics import replication_for

#: Kafka's runtime class path in a checkout, shared by all its homes; `make` fetches it there (see pom.xml).
#: None for an installed package, whose site-packages is no place for downloads: each home fetches its own.
LIBS_DIR: Path | None = DEPLOY_DIR / "target" / "libs" if PROJECT_ROOT is not None else None


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
    #: Files the running broker holds open, and its limit (None when not running or not readable).
    open_files: int | None = None
    open_files_limit: int | None = None


@dataclass(frozen=True)
class Node:
    """One KRaft node (broker and controller in one JVM) of a local cluster: its id and loopback ports."""

    node_id: int
    port: int
    controller_port: int


class BrokerHome:
    """Where a broker of `settings.home` keeps its files, and how they are prepared: the single default broker
    (`node` None), or `node` of the cluster whose nodes are `voters`. `extra_properties` are written after the
    template's, so they override it (Kafka reads a repeated key's last value)."""

    def __init__(self, settings: Settings, node: Node | None = None, voters: Sequence[Node] = (),
                 extra_properties: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.node = node or Node(1, settings.local_port, settings.local_controller_port)
        self.voters = tuple(voters) or (self.node,)
        self.extra_properties = dict(extra_properties or {})
        # Absolute: the JVM runs in kafka_dir, and the pid check compares command lines.
        self.root_dir = settings.home.expanduser().absolute() / "kafka"
        self.kafka_dir = self.root_dir if node is None else self.root_dir / f"node-{node.node_id}"
        self.data_dir = self.kafka_dir / "data"
        self.log_dir = self.kafka_dir / "logs"
        self.log_file = self.log_dir / "server.log"
        self.stdout_file = self.log_dir / "stdout.log"
        self.pid_file = self.kafka_dir / "broker.pid"
        self.cluster_id_file = self.root_dir / "cluster.id"
        self.properties_file = self.kafka_dir / "server.properties"
        self.lock_file = self.kafka_dir / ".lock"
        #: Size of server.log when this object last launched the broker: where its output begins.
        self._log_start = 0

    @property
    def libs_dir(self) -> Path:
        """Kafka's runtime class path, as downloaded by Maven."""
        return LIBS_DIR if LIBS_DIR is not None else self.kafka_dir / "libs"

    @property
    def standalone(self) -> bool:
        """The single-node quorum of the default broker (dynamic, formatted `--standalone`), not a cluster's."""
        return len(self.voters) == 1

    def write_properties(self) -> None:
        """Render the template; rewritten at every start so port changes take effect."""
        data_dir = str(self.data_dir).replace("\\", "\\\\")  # a backslash escapes in .properties
        replication = replication_for(len(self.voters))
        text = TEMPLATE_FILE.read_text().format(
            node_id=self.node.node_id,
            port=self.node.port,
            controller_port=self.node.controller_port,
            quorum=self._quorum(),
            replication=replication.factor,
            min_isr=replication.min_insync,
            data_dir=data_dir,
        )
        if self.extra_properties:
            text += "\n# Set by agl-events for this node; a repeated key's last value is the one Kafka reads.\n"
            text += "".join(f"{key}={value}\n" for key, value in self.extra_properties.items())
        self.properties_file.write_text(text)

    def _quorum(self) -> str:
        """The controller quorum line: the default broker's dynamic quorum of itself, or a cluster's static voters
        (every node knows all of them from the start, so a fresh cluster needs no `add-controller` steps)."""
        if self.standalone:
            return f"controller.quorum.bootstrap.servers=127.0.0.1:{self.node.controller_port}"
        voters = ",".join(f"{v.node_id}@127.0.0.1:{v.controller_port}" for v in self.voters)
        return f"controller.quorum.voters={voters}"

    def format_storage(self, java: str) -> None:
        """Format the data directory once (KRaft requires it): as a standalone dynamic quorum, or as a node of the
        static quorum its properties name, with the cluster id all nodes share."""
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id = self._cluster_id(java)
        quorum = ("--standalone",) if self.standalone else ()
        self._run_tool(
            java,
            "format", *quorum, "--ignore-formatted",
            "--cluster-id", cluster_id, "--config", str(self.properties_file), *self.format_options(),
        )  # fmt: skip

    def format_options(self) -> list[str]:
        """More `kafka-storage format` arguments: none here; a secured broker adds its SCRAM users (`broker.secure`)."""
        return []

    def _cluster_id(self, java: str) -> str:
        """The cluster id of this home, generated by Kafka on first use and then kept."""
        if self.cluster_id_file.exists():
            return self.cluster_id_file.read_text().strip()
        cluster_id = self._run_tool(java, "random-uuid").strip().splitlines()[-1]
        self.cluster_id_file.write_text(cluster_id + "\n")
        return cluster_id

    def _run_tool(self, java: str, *arguments: str) -> str:
        """Run Kafka's StorageTool and return its stdout, turning failures into BrokerError."""
        command = [java, *self.jvm_system_properties(), "-cp", self.class_path(), STORAGE_TOOL_CLASS]
        result = subprocess.run([*command, *arguments], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = last_lines((result.stdout + result.stderr).splitlines(), FAILURE_LOG_LINES)
            code = result.returncode
            raise BrokerError(f"kafka-storage {arguments[0]} failed (exit code {code}):\n{output}")
        return result.stdout

    def heap_options(self) -> tuple[str, ...]:
        """A development broker needs little memory (the default heap would claim a quarter of the machine); a
        cluster's node less, as three of them share the machine."""
        return ("-Xms256m", "-Xmx1g") if self.standalone else ("-Xms128m", "-Xmx512m")

    def jvm_system_properties(self) -> list[str]:
        return [f"-Dkafka.logs.dir={self.log_dir}", f"-Dlog4j2.configurationFile={LOG4J_CONFIG_FILE}"]

    def class_path(self) -> str:
        return str(self.libs_dir / "*")  # the JVM expands the wildcard itself

    def log_excerpt(self) -> str:
        """Kafka's errors since this start, then the end of server.log and of the JVM's stdout.

        The cause of a failed start (say, a port that is taken) is logged as an ERROR followed by a
        hundred lines of orderly shutdown, so the last lines alone would miss it.
        """
        parts = []
        errors = error_lines(read_from(self.log_file, self._log_start), FAILURE_LOG_LINES)
        if errors:
            parts.append(f"--- errors in {self.log_file} ---\n" + "\n".join(errors))
        for path in (self.log_file, self.stdout_file):
            lines = tail_file(path, FAILURE_LOG_LINES)
            if lines:
                parts.append(f"--- last lines of {path} ---\n" + "\n".join(lines))
        return "\n".join(parts) or f"(no log output in {self.log_dir})"

