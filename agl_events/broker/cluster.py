"""A local Kafka cluster: `agl-events kafka start --brokers 3`, for development and tests of replication.

Each node is one JVM that is both a broker and a voter of the KRaft controller quorum (combined mode), rather
than one controller and three brokers: three voters survive the loss of any one node, a SIGKILLed node takes a
broker and a controller down together as a lost machine would, and the cluster costs three JVMs, not four (one
controller would also be a single point of failure, so killing it would test nothing a real cluster has).

Node N listens on loopback ports AGL_KAFKA_PORT + 2(N-1) (clients) and AGL_KAFKA_CONTROLLER_PORT + 2(N-1) (the
quorum): 9092/9093, 9094/9095, 9096/9097 by default. Its files live in `<AGL_HOME>/kafka/node-N/` (as the single
broker's do in `kafka/`), the cluster id in `kafka/cluster.id`, and the cluster's size in `kafka/brokers`, so
`kafka status`, `stop`, `logs` and every command that starts the local broker on demand find all of its nodes.
A home without that file has the single default broker.
"""

from __future__ import annotations

import contextlib
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from agl_events.broker.home import BrokerStatus, Node
from agl_events.broker.install import BrokerError
from agl_events.config import Settings
from agl_events.log.admin import broker_ids, under_replicated
from agl_events.log.clients import LogError, make_admin
from agl_events.proc.locks import file_lock
from agl_events.proc.ports import port_free

#: How a cluster's nodes notice a dead one. A SIGKILLed node's partitions get new leaders once the controller
#: fences it, broker.session.timeout.ms after its last heartbeat: Kafka's 9 s would make each failover take 9 s.
#: 4 s (heartbeats every second) still rides through the GC pauses of three JVMs on two busy cores.
NODE_PROPERTIES = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"}
SIZE_FILE = "brokers"


class ClusterNode(Protocol):
    """What the cluster needs of a node: `broker.local.LocalBroker`, which builds on this module, passes itself."""

    node: Node
    log_file: Path

    @property
    def bootstrap(self) -> str: ...
    def launch(self, notes: list[str]) -> tuple[int, bool]: ...
    def wait_until_ready(self, pid: int, timeout: float, *, started_now: bool) -> None: ...
    def start(self, timeout: float = 60.0) -> BrokerStatus: ...
    def stop(self, timeout: float = 30.0) -> BrokerStatus: ...
    def status(self) -> BrokerStatus: ...
    def kill(self) -> int | None: ...
    def tail(self, n: int = 50) -> list[str]: ...
    def follow(self, poll_interval: float = 0.5) -> Iterator[str]: ...


#: Builds a node: (settings), or (settings, node, every node of the cluster, extra broker properties).
MakeNode = Callable[..., ClusterNode]


class ClusterStatus(BaseModel):
    """Every node's status, and the bootstrap servers that name them all."""

    bootstrap: str
    nodes: list[BrokerStatus]

    @property
    def ready(self) -> bool:
        return all(node.running and node.ready for node in self.nodes)


def node_layout(settings: Settings, brokers: int) -> tuple[Node, ...]:
    """The nodes of a `brokers`-node cluster on `settings`' ports: node N on port + 2(N-1), controller + 2(N-1)."""
    return tuple(Node(n, settings.local_port + 2 * (n - 1), settings.local_controller_port + 2 * (n - 1))
                 for n in range(1, brokers + 1))


#: Where `free_cluster_ports` looks: below Linux's ephemeral range (32768-60999), from which the kernel picks the
#: local ports of outgoing connections, so a client connecting meanwhile cannot take a port between pick and bind.
CLUSTER_PORTS = range(20000, 32000)


def free_cluster_ports(brokers: int, tries: int = 50) -> tuple[int, int]:
    """(port, controller port) whose `node_layout` for `brokers` is free now: 2 x brokers consecutive ports
    (tests and chaos runs start clusters of their own beside the user's)."""
    for _ in range(tries):
        base = random.randrange(CLUSTER_PORTS.start, CLUSTER_PORTS.stop - 2 * brokers)
        if all(port_free(port) for port in range(base, base + 2 * brokers)):
            return base, base + 1
    raise BrokerError(f"found no {2 * brokers} consecutive free ports on localhost in {tries} tries")


class LocalCluster:
    """The local broker of `settings.home`, one node or several: `brokers` (None: as many as the home last ran,
    one for a new home), each made by `make_node` (`broker.local.local_cluster` passes LocalBroker). One node is
    the single default broker, in the layout it always had."""

    def __init__(self, settings: Settings, brokers: int | None = None, *, make_node: MakeNode) -> None:
        self.settings = settings
        self.make_node = make_node
        self.root_dir = settings.home.expanduser().absolute() / "kafka"
        self.size_file = self.root_dir / SIZE_FILE
        self.brokers = brokers or self.recorded()
        if self.brokers < 1:
            raise BrokerError(f"a cluster needs at least one broker, not {self.brokers}")
        if self.brokers == 1:
            self.nodes: tuple[ClusterNode, ...] = (make_node(settings),)
        else:
            layout = node_layout(settings, self.brokers)
            self.nodes = tuple(make_node(settings, node, layout, NODE_PROPERTIES) for node in layout)

    @property
    def bootstrap(self) -> str:
        """Every node's client address: a client still bootstraps with any one of them down."""
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> ClusterNode:
        """The node with Kafka's broker id `node_id` (1 to brokers)."""
        return self.nodes[node_id - 1]

    def start(self, timeout: float = 60.0) -> ClusterStatus:
        """Start every node in the background and wait until all answer and the cluster lists them all;
        harmless when running. A home keeps one cluster size: starting another while it runs is refused."""
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self._refuse_other_size()
        if self.brokers == 1:
            self.size_file.unlink(missing_ok=True)
            return self._status([self.nodes[0].start(timeout=timeout)])
        with file_lock(self.root_dir / ".lock"):
            self.size_file.write_text(f"{self.brokers}\n")
            notes: list[str] = []
            started: list[ClusterNode] = []
            waits: list[tuple[ClusterNode, int, bool]] = []
            try:
                for node in self.nodes:  # all launched first: none answers before a majority of the quorum runs
                    pid, started_now = node.launch(notes)
                    started += [node] if started_now else []
                    waits.append((node, pid, started_now))
                for node, pid, started_now in waits:
                    node.wait_until_ready(pid, timeout, started_now=started_now)
                self.wait_for_brokers(timeout)
            except BaseException:  # a port taken, a node that died: none of the nodes started here is left behind
                for node in started:
                    node.stop(timeout=10.0)
                raise
        return self.status()

    def stop(self, timeout: float = 30.0) -> ClusterStatus:
        """Stop every node at once (SIGTERM, killed after `timeout` s): one by one, the last ones would wait for
        a quorum that has gone to move their leaders away."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            return self._status(list(pool.map(lambda node: node.stop(timeout=timeout), self.nodes)))

    def status(self) -> ClusterStatus:
        return self._status([node.status() for node in self.nodes])

    def wait_for_brokers(self, timeout: float) -> None:
        """Block until the cluster's metadata lists every node as a broker (a restarted node registers again)."""
        wanted = {node.node.node_id for node in self.nodes}
        self._wait(lambda admin: wanted <= broker_ids(admin), timeout, f"brokers {sorted(wanted)} registered")

    def wait_in_sync(self, timeout: float) -> None:
        """Block until no partition has fewer in-sync replicas than replicas: a restarted node has caught up, so
        stopping the next one takes no partition below min.insync.replicas (a rolling restart's step)."""
        self._wait(lambda admin: not under_replicated(admin), timeout, "every partition's replicas in sync")

    def restart(self, node_id: int, timeout: float = 60.0) -> None:
        """Stop one node cleanly (its leaders move first), start it again, and wait until it is back in sync."""
        node = self.node(node_id)
        node.stop()
        node.start(timeout=timeout)
        self.wait_for_brokers(timeout)
        self.wait_in_sync(timeout)

    def tail(self, n: int = 50) -> list[str]:
        """The last `n` lines of each node's log, prefixed by its node in a cluster."""
        if self.brokers == 1:
            return self.nodes[0].tail(n)
        return [f"node-{node.node.node_id} | {line}" for node in self.nodes for line in node.tail(n)]

    def follow(self) -> Iterator[str]:
        """Lines appended to any node's log from now on, prefixed by its node in a cluster; never returns."""
        if self.brokers == 1:
            yield from self.nodes[0].follow()
        lines: queue.Queue[str] = queue.Queue()

        def pump(node: ClusterNode) -> None:
            for line in node.follow():
                lines.put(f"node-{node.node.node_id} | {line}")

        for node in self.nodes:
            threading.Thread(target=pump, args=(node,), daemon=True).start()
        while True:
            yield lines.get()

    def recorded(self) -> int:
        """How many nodes this home's local broker has (1 unless a cluster was started in it last)."""
        return int(self.size_file.read_text()) if self.size_file.exists() else 1

    def _refuse_other_size(self) -> None:
        recorded = self.recorded()
        recorded_nodes = LocalCluster(self.settings, make_node=self.make_node).nodes
        if self.brokers != recorded and any(node.status().running for node in recorded_nodes):
            raise BrokerError(
                f"{self.root_dir} runs a local broker of {recorded} node(s); stop it first "
                f"(`agl-events kafka stop`) to start {self.brokers}, or use another --home / AGL_HOME.")

    def _wait(self, done: Callable[[Any], bool], timeout: float, what: str) -> None:
        """Ask `done(admin)` until it holds; a cluster that does not answer the question yet is asked again."""
        admin = make_admin(self.bootstrap, log_level=0)
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(LogError):
                if done(admin):
                    return
            if time.monotonic() > deadline:
                raise BrokerError(f"the local cluster at {self.bootstrap} did not get {what} within {timeout:g} s")
            time.sleep(0.25)

    def _status(self, nodes: list[BrokerStatus]) -> ClusterStatus:
        return ClusterStatus(bootstrap=self.bootstrap, nodes=nodes)
