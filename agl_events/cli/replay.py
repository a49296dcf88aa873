"""`agl-events replay ...`: rebuild and verify views, snapshots, and training data exported from the log."""

from __future__ import annotations

import typer

replay_app = typer.Typer(help="Replay an experiment's history: rebuild, verify, snapshot, export.",
                         no_args_is_help=True)
