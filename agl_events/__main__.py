"""`python -m agl_events ...` is the `agl-events` command (handy where scripts are not on PATH)."""

from agl_events.cli.main import app

app()
