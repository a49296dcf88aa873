"""`agl-events up` and `down`, the command line's side of the supervisor.

`up` starts the local broker when it is the one in use and not running (and records that, so `down` stops it
again), creates the experiment's topics, writes the plan, and starts the supervisor (`agl-events supervise`) in
a session of its own, so it outlives the command and a Ctrl-C in the terminal; then it waits until every store
answers. `--foreground` runs the same supervisor attached instead: a Ctrl-C reaches it and it stops everything
in order. A lock file serialises two `up`s of one experiment; the second finds the first's supervisor.

`down` sends the supervisor SIGTERM and waits for it to stop everything; one that does not finish in time is
killed, and so are the process groups of its children.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from agl_events.broker.local import LocalBroker, ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.proc.locks import file_lock
from agl_events.proc.logs import tail_file
from agl_events.proc.pids import command_line, process_alive, wait_for_exit
from agl_events.proc.ports import free_port, port_free
from agl_events.server.process import store_ready
from agl_events.supervise.paths import SUPERVISE_COMMAND, UpPaths
from agl_events.supervise.plan import STOP_ORDER, Kind, Plan, UpOptions, build_plan

Say = Callable[[str], None]


class UpError(RuntimeError):
    """`up` could not bring the experiment up; the message says why and quotes the logs."""


class AlreadyUpError(UpError):
    def __init__(self, pid: int, paths: UpPaths) -> None:
        super().__init__(f"experiment {paths.folder.name} is already up (supervisor pid {pid}); `agl-events status` "
                         "shows it, `agl-events down` stops it")
        self.pid = pid


def start(settings: Settings, options: UpOptions, *, advertise: bool, stop_grace: float, foreground: bool
          ) -> tuple[Plan, subprocess.Popen[bytes]]:
    """Broker, topics, plan, and the supervisor started; raises AlreadyUpError when one runs already."""
    paths = UpPaths(settings.home, settings.experiment)
    paths.logs.mkdir(parents=True, exist_ok=True)
    with file_lock(paths.folder / ".lock"):
        if (pid := paths.supervisor_pid()) is not None:
            raise AlreadyUpError(pid, paths)
        broker_started = settings.uses_local_broker and not LocalBroker(settings).status().running
        bootstrap = ensure_broker(settings)
        plan = build_plan(options, experiment=settings.experiment, bootstrap=bootstrap,
                          home=settings.home.expanduser().absolute(), folder=paths.folder, free_port=free_port,
                          advertise=advertise, broker_started=broker_started, stop_grace=stop_grace)
        try:
            taken = [f"{spec.name} on port {spec.port}" for spec in plan.processes
                     if spec.kind in (Kind.STORE, Kind.PROXY) and spec.port is not None and not port_free(spec.port)]
            if taken:
                raise UpError(f"ports in use: {', '.join(taken)} (another store or `up`?); pick others with "
                              "--store-port / --proxy-port")
            create_topics(make_admin(bootstrap), settings.experiment)
        except BaseException:
            if broker_started:
                LocalBroker(settings).stop()
            raise
        paths.plan_file.write_text(plan.model_dump_json(indent=2))
        command = [sys.executable, "-m", "agl_events", "--home", str(plan.home), "--experiment", plan.experiment,
                   SUPERVISE_COMMAND]
        if foreground:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        else:
            with paths.supervisor_log.open("ab") as log:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True)
        paths.pid_file.write_text(f"{process.pid}\n")  # the supervisor writes it too: a second `up` sees it now
    return plan, process


def wait_attached(supervisor: subprocess.Popen[bytes]) -> int:
    """`--foreground`: wait for the supervisor; a Ctrl-C reaches it too (same process group) and it stops
    everything, while this process keeps waiting for it to finish."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: supervisor.send_signal(signal.SIGTERM))
    return supervisor.wait()


def wait_for_stores(plan: Plan, supervisor: subprocess.Popen[bytes], timeout: float, progress: Say,
                    auth_token: str | None = None) -> None:
    """Until every store answers (its view caught up); an exited supervisor or the timeout is an UpError with
    the logs' ends. On a timeout everything keeps running: a store with a long log may only be slow."""
    paths = UpPaths(plan.home, plan.experiment)
    stores = plan.of_kind(Kind.STORE)
    started = time.monotonic()
    while True:
        if supervisor.poll() is not None:
            raise UpError(f"the supervisor exited with status {supervisor.returncode}; the end of "
                          f"{paths.supervisor_log}:\n" + "\n".join(tail_file(paths.supervisor_log, 30)))
        ready = {spec.name for spec in stores if spec.url and store_ready(spec.url, 2.0, auth_token)}
        if len(ready) == len(stores):
            return
        elapsed = time.monotonic() - started
        if elapsed > timeout:
            late = [spec for spec in stores if spec.name not in ready]
            logs = "\n".join(f"--- the end of {plan.log_file(spec.name)} ---\n"
                             + "\n".join(tail_file(plan.log_file(spec.name), 20)) for spec in late)
            raise UpError(f"{', '.join(spec.name for spec in late)} did not answer within {timeout:g} s; everything "
                          f"keeps running under the supervisor (pid {supervisor.pid}), which restarts what crashes: "
                          f"`agl-events status` shows it, `agl-events down` stops it.\n{logs}")
        progress(f"waiting for the stores to answer: {len(ready)} of {len(stores)} ready ({elapsed:.0f} s)")
        time.sleep(0.5)


def down(settings: Settings, timeout: float | None = None) -> list[str] | None:
    """Stop the experiment's supervisor and everything it runs; returns what was stopped (None: nothing was up).
    `timeout`: how long the supervisor may take (default: its grace period per kind of process, and a minute).
    Processes a killed supervisor left behind (state.json still names them) are killed too."""
    paths = UpPaths(settings.home, settings.experiment)
    pid = paths.supervisor_pid()
    if pid is None:
        leftovers = _kill_leftovers(paths)
        return [f"{line}, left by a supervisor that was gone" for line in leftovers] if leftovers else None
    plan = Plan.model_validate_json(paths.plan_file.read_bytes())
    timeout = timeout if timeout is not None else plan.stop_grace * len(STOP_ORDER) + 60.0
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if wait_for_exit(pid, timeout):
        state = paths.read_state()
        return state.stopped if state is not None else []
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    wait_for_exit(pid, 10.0)
    paths.pid_file.unlink(missing_ok=True)
    return [f"the supervisor (pid {pid}): it had not stopped everything within {timeout:g} s, killed",
            *_kill_leftovers(paths)]


def _kill_leftovers(paths: UpPaths) -> list[str]:
    """SIGKILL the process group of every child state.json names that still runs (its command line names the
    experiment, so a reused pid is left alone)."""
    state = paths.read_state()
    killed = []
    for process in state.processes if state is not None else []:
        running = command_line(process.pid) if process.pid is not None and process_alive(process.pid) else None
        if process.pid is not None and running is not None and state is not None and state.experiment in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
                killed.append(f"{process.name} (pid {process.pid}, killed)")
    return killed
