"""`agl-events samples`: a wrong --adapter is a usage error, before any broker is asked for.

The worker itself runs in tests/processors/test_samples.py.
"""

from __future__ import annotations

from typer.testing import CliRunner

from agl_events.cli.main import app


def test_an_adapter_that_names_nothing_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["--bootstrap", "localhost:1", "samples", "--adapter", "tests.nope:x"])
    assert result.exit_code == 2
    assert "--adapter" in result.output and "No module named" in result.output
