"""Process tools live in one place (`agl_events.proc`): no other module or test writes its own free-port helper,
and the broker module is the broker's lifecycle, not the project's toolbox."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The one definition.
HOME = ROOT / "agl_events" / "proc" / "ports.py"
#: Runs by path in Agent Lightning's own virtual environment, where `agl_events` is not installed.
STDLIB_ONLY = ROOT / "agl_events" / "bench" / "agl_side.py"
#: A function that hands out a port, or the kernel's pick for port 0 read back from a bound socket.
FREE_PORT = re.compile(r"def _?free_port\b|\.bind\(\([^)]*,\s*0\)\)\s*\n\s*return")


def _sources() -> list[Path]:
    return [path for top in ("agl_events", "tests") for path in (ROOT / top).rglob("*.py")]


def test_free_port_is_defined_once() -> None:
    found = [str(path.relative_to(ROOT)) for path in _sources()
             if path not in (HOME, STDLIB_ONLY) and FREE_PORT.search(path.read_text())]
    assert found == []
    assert FREE_PORT.search(HOME.read_text())


def test_the_broker_module_stays_small() -> None:
    assert len((ROOT / "agl_events" / "broker" / "local.py").read_text().splitlines()) <= 300
