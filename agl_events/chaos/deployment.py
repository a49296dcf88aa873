"""The chaos run's deployment: what `agl-events up` runs, under its supervisor (`supervise.Supervisor`), driven
tick by tick from the run's loop, so kills and restarts go through the code `up` uses: the plan's commands, its
child processes in process groups of their own, its restarts after a backoff, its ordered stop."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable

from agl_events.config import Settings
from agl_events.proc.ports import free_port, port_free
from agl_events.server.process import store_ready
from agl_events.supervise.backoff import BackoffPolicy
from agl_events.supervise.paths import UpPaths
from agl_events.supervise.plan import Kind, UpOptions, build_plan
from agl_events.supervise.supervisor import Supervisor

AGENT = "agl_events.chaos.agent:chaos_agent"
#: `up`'s backoff with a shorter ceiling: a run lasts minutes, so a process that crashed a few times in a row
#: (a store or processor through the broker restart) waits at most 5 s, not a minute.
RESTARTS = BackoffPolicy(maximum=5.0)
#: Seconds each kind of process gets to stop after SIGTERM at the end (runners finish their rollout).
STOP_GRACE_SECONDS = 15.0
Say = Callable[[str], None]


def _free_ports(count: int) -> int:
    """The first of `count` consecutive ports free now (`up` gives stores consecutive ports)."""
    while True:
        first = free_port()
        if first + count - 1 <= 65535 and all(port_free(first + k) for k in range(1, count)):
            return first


class Deployment:
    """The run's processes under the supervisor of `agl-events up` (`supervise.Supervisor`, driven here tick by
    tick): its plan, its child processes, its restarts with backoff. A kill is a SIGKILL of one child; the
    supervisor notes the exit and starts it again, as it does for a crash. What was killed, and what the
    supervisor restarted that had not been killed, is counted by kind."""

    def __init__(self, settings: Settings, runners: int, say: Say, stores: int = 1) -> None:
        """`stores` store processes (one store group: each advertises its URL to the others), one processor
        worker and `runners` runner commands of `settings`' experiment, runner i talking to store i % stores (as
        `up` spreads them), under `settings.home`, on the bootstrap servers `settings` names."""
        home = settings.home.absolute()
        paths = UpPaths(home, settings.experiment)
        options = UpOptions(runners=runners, processors=1, stores=stores, samples=False, agent=AGENT,
                            store_port=_free_ports(stores))
        plan = build_plan(options, experiment=settings.experiment, bootstrap=settings.bootstrap_servers,
                          home=home, folder=paths.folder, free_port=free_port, advertise=True,
                          stop_grace=STOP_GRACE_SECONDS)
        self.supervisor = Supervisor(plan, paths, policy=RESTARTS, say=say)
        #: Every member of the store group; any one answers for the whole experiment (reads about a rollout go
        #: to its owner, `query_rollouts` fans out), so the run asks whichever answers.
        self.store_urls = [spec.url or "" for spec in plan.of_kind(Kind.STORE)]
        self.processor_url = plan.of_kind(Kind.PROCESSOR)[0].url or ""
        self.say = say
        self.kills: Counter[str] = Counter()
        self.crash_restarts: Counter[str] = Counter()
        self._killed: set[str] = set()  # killed, not started again yet

    def start(self, timeout: float = 120.0) -> None:
        """Start everything; returns once every store answers (one that exits meanwhile, with no broker yet, say,
        is started again by the supervisor)."""
        self.supervisor.start()
        self.heal_until(self.stores_ready, timeout, "the stores did not answer")

    def stores_ready(self) -> bool:
        """Whether every store answers (its view caught up)."""
        return all(store_ready(url) for url in self.store_urls)

    def kill(self, kind: str, rng: random.Random) -> None:
        """SIGKILL one running process of `kind` (store, processor, runner); the supervisor starts it again. While
        none runs (each is between a crash and its restart), the supervisor is ticked until one does."""
        children = {p.name: self.supervisor.children[p.name] for p in self.supervisor.state.processes if p.kind == kind}
        self.heal_until(lambda: any(child.alive() for child in children.values()), 60.0, f"no {kind} process ran")
        name = rng.choice([name for name, child in children.items() if child.alive()])
        children[name].kill9()
        self.kills[kind] += 1
        self._killed.add(name)
        self.say(f"killed {name} (SIGKILL)")

    def heal(self) -> None:
        """One supervisor tick: exits noted, due restarts started; a restart of a process not killed here is a
        restart after a crash (a store or processor that lost the broker, say)."""
        before = {p.name: p.restarts for p in self.supervisor.state.processes}
        self.supervisor.tick()
        for process in self.supervisor.state.processes:
            if process.restarts > before[process.name]:
                if process.name in self._killed:
                    self._killed.discard(process.name)
                else:
                    self.crash_restarts[process.kind.value] += 1

    def heal_until(self, done: Callable[[], bool], timeout: float, failure: str) -> None:
        """Tick the supervisor until `done()`; after `timeout` s a TimeoutError that says `failure`."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{failure} within {timeout:g} s; see the logs in {self.supervisor.paths.logs}")
            self.heal()
            time.sleep(0.2)

    def stop(self) -> None:
        """Runners first, the store last, as `agl-events down` stops them."""
        self.supervisor.shutdown()
