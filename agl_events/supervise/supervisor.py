"""The supervisor of `agl-events up`: starts the plan's processes, starts a crashed one again after its backoff,
keeps state.json current, and on SIGTERM or SIGINT stops everything in order.

One loop, every 0.2 s: a process that exited is noted (exit status, what is left of its process group killed)
and given a restart time by its `Backoff`; one whose time has come is started. Stopping goes kind by kind
(`plan.STOP_ORDER`): every process of a kind gets SIGTERM at once, then they share one grace period before
SIGKILL; the local broker is stopped last, and only if `up` started it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from agl_events.broker.local import LocalBroker
from agl_events.config import Settings
from agl_events.proc.child import ChildProcess, rotate
from agl_events.supervise.backoff import Backoff, BackoffPolicy
from agl_events.supervise.paths import UpPaths, supervised_experiments
from agl_events.supervise.plan import STOP_ORDER, Plan
from agl_events.supervise.state import ProcessState, UpState, describe_exit

#: A process's log is moved aside (to .1, .2, .3) when it is larger than this at a start.
LOG_MAX_BYTES = 20 << 20
TICK_SECONDS = 0.2
Say = Callable[[str], None]


class Supervisor:
    def __init__(self, plan: Plan, paths: UpPaths, *, policy: BackoffPolicy | None = None, say: Say = print,
                 python: str = sys.executable) -> None:
        self.plan, self.paths, self.say = plan, paths, say
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.children = {spec.name: ChildProcess(plan.command(spec, python), plan.log_file(spec.name), env=env,
                                                 own_group=True)
                         for spec in plan.processes}
        self.backoffs = {spec.name: Backoff(policy) for spec in plan.processes}
        self.state = UpState(
            experiment=plan.experiment, bootstrap=plan.bootstrap, supervisor_pid=os.getpid(), started_at=time.time(),
            broker_started=plan.broker_started,
            processes=[ProcessState(name=spec.name, kind=spec.kind, port=spec.port, url=spec.url,
                                    log=plan.log_file(spec.name)) for spec in plan.processes])
        self._stop = threading.Event()

    def request_stop(self, *_: object) -> None:
        """What SIGTERM and SIGINT do: the loop ends and everything is stopped in order."""
        self._stop.set()

    def run(self) -> list[str]:
        """Start everything, supervise until asked to stop, stop everything (also when the supervisor itself
        fails: no child outlives it); returns what was stopped."""
        self.paths.pid_file.write_text(f"{os.getpid()}\n")
        try:
            self.say(f"supervising {len(self.children)} processes of experiment {self.plan.experiment} "
                     f"(Kafka {self.plan.bootstrap})")
            self.start()
            while not self._stop.wait(TICK_SECONDS):
                self.tick()
        finally:
            stopped = self.shutdown()
            self.paths.pid_file.unlink(missing_ok=True)
        return stopped

    def start(self) -> None:
        """Start every process of the plan (`run` does, and so does a caller that drives `tick` itself, as the
        chaos run does)."""
        for name in self.children:
            self._start(name, restart=False)
        self._save()

    def tick(self, now: float | None = None) -> bool:
        """Note exits, start what is due, and keep state.json current; returns whether anything changed."""
        now = time.monotonic() if now is None else now
        changed = False
        for process in self.state.processes:
            child, backoff = self.children[process.name], self.backoffs[process.name]
            if child.alive():
                continue
            if process.status in ("starting", "up"):
                child.reap()
                restart_at = backoff.exited(now)
                process.status, process.last_exit, process.pid = "restarting", child.returncode, None
                process.restart_at = time.time() + (restart_at - now)
                self.say(f"{process.name} exited ({describe_exit(child.returncode)}); starting it again in "
                         f"{restart_at - now:g} s (log {process.log})")
                changed = True
            elif process.status == "restarting" and backoff.due(now):
                self._start(process.name, restart=True)
                changed = True
        if changed:
            self._save()
        return changed

    def _start(self, name: str, *, restart: bool) -> None:
        process = self._process(name)
        child = self.children[name]
        rotate(child.log_file, LOG_MAX_BYTES)
        process.pid = child.start()
        self.backoffs[name].started(time.monotonic())
        process.status, process.started_at, process.restart_at = "up", time.time(), None
        if restart:
            process.restarts += 1
            self.say(f"started {name} again (pid {process.pid}, restart {process.restarts})")

    def shutdown(self) -> list[str]:
        """Stop every process, kind by kind in `STOP_ORDER`, then the broker if `up` started it."""
        self.state.stopping = True
        self._save()
        stopped = []
        for kind in STOP_ORDER:
            names = [p.name for p in self.state.processes if p.kind == kind]
            for name in names:
                process = self._process(name)
                if self.children[name].alive():
                    process.status = "stopping"
                    self.children[name].send(signal.SIGTERM)
            self._save()
            deadline = time.monotonic() + self.plan.stop_grace
            for name in names:
                process, child = self._process(name), self.children[name]
                was = process.pid
                exit_status = child.finish(deadline)
                if process.status == "stopping":
                    process.last_exit = exit_status
                    stopped.append(f"{name} (pid {was}, exit {describe_exit(exit_status)})")
                process.status, process.pid, process.restart_at = "stopped", None, None
            self._save()
        if self.plan.broker_started:
            others = [name for name in supervised_experiments(self.plan.home) if name != self.plan.experiment]
            if others:
                self.say(f"leaving the local Kafka broker running: experiments {', '.join(others)} use it")
            else:
                settings = Settings.from_env(home=self.plan.home, experiment=self.plan.experiment)
                stopped.append(f"the local Kafka broker: {LocalBroker(settings).stop().message}")
        for line in stopped:
            self.say(f"stopped {line}")
        self.state.stopped = stopped
        self._save()
        return stopped

    def _process(self, name: str) -> ProcessState:
        return next(p for p in self.state.processes if p.name == name)

    def _save(self) -> None:
        self.paths.write_state(self.state)


def supervise(paths: UpPaths, say: Say = print) -> list[str]:
    """Run the supervisor of the plan in `paths` in this process until SIGTERM or SIGINT (Ctrl-C); returns what
    it stopped."""
    supervisor = Supervisor(Plan.model_validate_json(paths.plan_file.read_bytes()), paths, say=say)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, supervisor.request_stop)
    return supervisor.run()
