"""The tables of `agl-events status`, from snapshots (pure: rendered from data, so tests check the text)."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agl_events.supervise.state import Snapshot, UpState, describe_exit

_STATUS_STYLE = {"up": "green", "starting": "yellow", "restarting": "red", "stopping": "yellow", "stopped": "dim"}


def render(snapshot: Snapshot, previous: Snapshot | None = None, now: Callable[[], float] = time.time
           ) -> RenderableType:
    """Processes, rates, rollouts, resources and consumer lag; rates need the `previous` snapshot."""
    parts: list[RenderableType] = []
    if snapshot.state is None:
        parts.append(Text(f"no supervisor runs for experiment {snapshot.experiment} (`agl-events up` starts one): "
                          "Kafka and store figures only", style="yellow"))
    else:
        parts.append(processes_table(snapshot.state, now()))
    parts.append(figures_table(snapshot, previous))
    if not snapshot.kafka_error:
        parts.append(lag_table(snapshot))
    return Group(*parts)


def processes_table(state: UpState, now: float) -> Table:
    stopping = ", stopping" if state.stopping else ""
    title = (f"experiment {state.experiment}: supervisor pid {state.supervisor_pid}, "
             f"up {_duration(now - state.started_at)}{stopping} (Kafka {state.bootstrap})")
    table = Table(title=title, title_justify="left")
    for column in ("process", "pid", "status", "restarts", "uptime", "last exit", "address"):
        table.add_column(column, justify="right" if column in ("pid", "restarts", "last exit") else "left")
    for process in state.processes:
        uptime = _duration(now - process.started_at) if process.status == "up" and process.started_at else ""
        status = process.status
        if status == "restarting" and process.restart_at is not None:
            status += f" in {max(0.0, process.restart_at - now):.0f} s"
        table.add_row(process.name, _text(process.pid), Text(status, style=_STATUS_STYLE[process.status]),
                      str(process.restarts), uptime, describe_exit(process.last_exit), process.url or "")
    return table


def figures_table(snapshot: Snapshot, previous: Snapshot | None) -> Table:
    table = Table(title="throughput and rollouts", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    if snapshot.kafka_error:
        table.add_row("Kafka", Text(snapshot.kafka_error, style="red"))
    else:
        table.add_row("spans/s", _rate(snapshot, previous, "spans_end"))
        table.add_row("samples/s", _rate(snapshot, previous, "samples_end"))
        table.add_row("spans, samples (log end)", f"{snapshot.spans_end}, {snapshot.samples_end}")
    store = snapshot.store
    if store is None:
        table.add_row("store", "none known (give --store-url)")
    elif store.error:
        table.add_row(f"store {store.url}", Text(store.error, style="red"))
    else:
        counts = ", ".join(f"{status} {n}" for status, n in store.rollouts.items() if n) or "none"
        table.add_row("rollouts", counts)
        table.add_row("latest resources", "none" if store.resources_id is None
                      else f"{store.resources_id} (version {store.resources_version})")
        if store.owners:
            table.add_row("store group", ", ".join(f"p{p} {url}" for p, url in sorted(store.owners.items())))
    return table


def lag_table(snapshot: Snapshot) -> Table:
    table = Table(title="consumer groups", title_justify="left")
    for column in ("group", "role", "topic", "partition", "committed", "end", "lag"):
        table.add_column(column, justify="right" if column in ("partition", "committed", "end", "lag") else "left")
    for lag in snapshot.lags:
        table.add_row(lag.group, lag.role, lag.topic, str(lag.partition), str(lag.committed), str(lag.end),
                      Text(str(lag.lag), style="bold red" if lag.lag else "green"))
    for group, note in snapshot.group_notes.items():
        table.add_row(group, Text(note, style="dim"), "", "", "", "", "")
    return table


def _rate(snapshot: Snapshot, previous: Snapshot | None, field: str) -> str:
    if previous is None or previous.kafka_error or snapshot.taken_at <= previous.taken_at:
        return "-"
    return f"{(getattr(snapshot, field) - getattr(previous, field)) / (snapshot.taken_at - previous.taken_at):.1f}"


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def _duration(seconds: float) -> str:
    seconds = int(max(0.0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"
