"""The command line's side of `up`: a store gets `--advertise-url` exactly when `agl-events store --help` lists it
(the option comes with partition ownership), so `up` follows the store command without an edit."""

from __future__ import annotations

from typer.testing import CliRunner

from agl_events.cli.main import app
from agl_events.cli.up import _store_advertises


def test_advertise_url_is_passed_exactly_when_the_store_command_takes_it() -> None:
    result = CliRunner().invoke(app, ["store", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert _store_advertises() == ("--advertise-url" in result.output)
