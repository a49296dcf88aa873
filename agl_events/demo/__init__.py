"""`make demo` / `agl-events demo`: a small agent trained end to end on the local broker, then the live view
compared with one rebuilt from offset 0."""

from agl_events.demo.agent import adder
from agl_events.demo.run import DemoReport, print_report, run_demo

__all__ = ["DemoReport", "adder", "print_report", "run_demo"]
