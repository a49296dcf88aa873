"""What `agl-events up` runs for an experiment, from its options: pure, so the process list, ports and folders
are tested without starting anything.

Every process is an `agl-events` command (the one a user would run by hand), given the experiment, the resolved
bootstrap servers (so no child ever starts a broker of its own) and the home folder. Stores take consecutive
ports from `--store-port`; runner i talks to store i % S; processor workers and the samples worker get web
ports nobody uses and folders of their own under the experiment's `up` folder, so several of them on one
machine never share a RocksDB folder.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field, model_validator


class Kind(StrEnum):
    STORE = "store"
    PROCESSOR = "processor"
    SAMPLES = "samples"
    PROXY = "proxy"
    RUNNER = "runner"


#: The order `down` stops them in: runners first (they finish their rollout and report it to a store that is
#: still there), then what feeds on the log, the stores last.
STOP_ORDER = (Kind.RUNNER, Kind.PROXY, Kind.SAMPLES, Kind.PROCESSOR, Kind.STORE)


class UpOptions(BaseModel):
    """The options of `agl-events up`."""

    runners: int = Field(2, ge=0)
    processors: int = Field(1, ge=0)
    stores: int = Field(1, ge=1)
    samples: bool = True
    proxy: bool = False
    model_list: Path | None = None
    proxy_port: int = Field(4000, ge=1, le=65535)
    agent: str | None = Field(None, description="module:object of the runners' agent")
    store_port: int = Field(ge=1, le=65535, description="the first store's port (the command's default: 4747)")

    @model_validator(mode="after")
    def _complete(self) -> UpOptions:
        if self.runners > 0 and not self.agent:
            raise ValueError("runners need an agent: give --agent my_package.agents:my_agent (or --runners 0)")
        if self.proxy and self.model_list is None:
            raise ValueError("--proxy needs --model-list FILE (the LiteLLM model list)")
        if self.store_port + self.stores - 1 > 65535:
            raise ValueError(f"{self.stores} stores from port {self.store_port} run past port 65535")
        return self


class ProcessSpec(BaseModel):
    """One supervised process: a name unique in the experiment, and the `agl-events` arguments after the
    global options."""

    name: str
    kind: Kind
    args: list[str]
    port: int | None = None
    #: Where it answers HTTP (stores, workers' web endpoints, the proxy).
    url: str | None = None


class Plan(BaseModel):
    """Everything the supervisor needs, written to the experiment's folder as plan.json."""

    experiment: str
    bootstrap: str
    home: Path
    folder: Path
    #: `up` started the local broker, so `down` stops it; a broker that was already running is left alone.
    broker_started: bool = False
    #: Seconds each kind of process gets to stop after SIGTERM before SIGKILL (runners finish their rollout).
    stop_grace: float = Field(30.0, gt=0)
    processes: list[ProcessSpec]

    def command(self, spec: ProcessSpec, python: str) -> list[str]:
        """The command line of `spec`, run with the interpreter `python`."""
        return [python, "-m", "agl_events", "--bootstrap", self.bootstrap, "--experiment", self.experiment,
                "--home", str(self.home), *spec.args]

    def log_file(self, name: str) -> Path:
        return self.folder / "logs" / f"{name}.log"

    def of_kind(self, kind: Kind) -> list[ProcessSpec]:
        return [spec for spec in self.processes if spec.kind == kind]


def store_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def build_plan(options: UpOptions, *, experiment: str, bootstrap: str, home: Path, folder: Path,
               free_port: Callable[[], int], advertise: bool = False, broker_started: bool = False,
               stop_grace: float = 30.0) -> Plan:
    """The processes for `options`. `free_port` hands out the workers' web ports; `advertise`: the store command
    takes `--advertise-url` (several stores sharing an experiment tell each other where they are)."""
    stores = []
    for i in range(options.stores):
        port = options.store_port + i
        args = ["store", "--port", str(port), "--views", str(folder / "views" / f"store-{i}"),
                "--log-level", "warning"]
        if advertise:
            args += ["--advertise-url", store_url(port)]
        stores.append(ProcessSpec(name=f"store-{i}", kind=Kind.STORE, args=args, port=port, url=store_url(port)))
    processes = list(stores)
    for i in range(options.processors):
        port = free_port()
        processes.append(ProcessSpec(
            name=f"processor-{i}", kind=Kind.PROCESSOR, port=port, url=store_url(port),
            args=["processor", "--data-dir", str(folder / "processor" / str(i)), "--web-port", str(port)]))
    if options.samples:
        port = free_port()
        processes.append(ProcessSpec(name="samples", kind=Kind.SAMPLES, port=port, url=store_url(port),
                                     args=["samples", "--data-dir", str(folder / "samples"), "--web-port", str(port)]))
    if options.proxy:
        assert options.model_list is not None
        processes.append(ProcessSpec(
            name="proxy", kind=Kind.PROXY, port=options.proxy_port, url=store_url(options.proxy_port),
            args=["proxy", "--model-list", str(options.model_list.resolve()), "--port", str(options.proxy_port),
                  "--store-url", stores[0].url or "", "--log-level", "warning"]))
    for i in range(options.runners):
        assert options.agent is not None
        processes.append(ProcessSpec(
            name=f"runner-{i}", kind=Kind.RUNNER,
            args=["runner", "--agent", options.agent, "-n", "1", "--store-url", stores[i % options.stores].url or "",
                  "--name", f"runner-{i}"]))
    return Plan(experiment=experiment, bootstrap=bootstrap, home=home, folder=folder, broker_started=broker_started,
                stop_grace=stop_grace, processes=processes)
