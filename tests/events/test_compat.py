"""Schema evolution: the kept history must stay readable, and a breaking change must be caught."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agl_events.cli.main import app
from agl_events.events.compat import check_backward_compatibility, check_pair, snapshot_history
from agl_events.events.schemas import SCHEMAS_DIR, read_event_schemas, read_history


def test_every_current_schema_reads_every_kept_version() -> None:
    history = read_history(SCHEMAS_DIR / "history")
    assert set(history) == {s.name for s in read_event_schemas(SCHEMAS_DIR)}, "every kind has a kept v1"
    assert check_backward_compatibility(SCHEMAS_DIR) == []


def test_cli_check_passes_on_the_project() -> None:
    result = CliRunner().invoke(app, ["schemas", "check"])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output


@pytest.fixture
def schemas_copy(tmp_path: Path) -> Path:
    target = tmp_path / "schemas"
    shutil.copytree(SCHEMAS_DIR, target)
    return target


def _edit(path: Path, edit: callable) -> None:  # type: ignore[valid-type]
    schema = json.loads(path.read_text())
    edit(schema)
    path.write_text(json.dumps(schema))


def test_adding_a_field_with_a_default_is_compatible_and_can_be_kept(schemas_copy: Path) -> None:
    _edit(schemas_copy / "AttemptHeartbeat.avsc",
          lambda s: s["fields"].append({"name": "note", "type": ["null", "string"], "default": None}))
    assert check_backward_compatibility(schemas_copy) == []
    written = snapshot_history(schemas_copy)
    assert [p.relative_to(schemas_copy).as_posix() for p in written] == ["history/AttemptHeartbeat/v2.avsc"]
    assert snapshot_history(schemas_copy) == []  # nothing changed since


def test_adding_a_field_without_default_is_reported_with_its_path(schemas_copy: Path) -> None:
    _edit(schemas_copy / "AttemptHeartbeat.avsc",
          lambda s: s["fields"].append({"name": "cpu", "type": "double"}))
    problems = check_backward_compatibility(schemas_copy)
    assert [str(p) for p in problems] == [
        "AttemptHeartbeat cannot read v1: at $.cpu: field added without a default"
    ]


def test_changing_a_nested_field_type_is_reported(schemas_copy: Path) -> None:
    def retype(schema: dict) -> None:
        for field in schema["fields"]:
            if field["name"] == "sequence_id":
                field["type"] = "string"

    _edit(schemas_copy / "types" / "Attempt.avsc", retype)
    problems = check_backward_compatibility(schemas_copy)
    assert {p.event for p in problems} == {"AttemptCreated", "AttemptUpdated", "RolloutFinished"}
    by_event = {p.event: p for p in problems}
    assert all(by_event[e].path == "$.attempt.sequence_id" and "int cannot be read as string" in by_event[e].reason
               for e in ("AttemptCreated", "AttemptUpdated"))
    # RolloutFinished holds the attempt in a union with null: the union is what no longer reads.
    assert by_event["RolloutFinished"].path == "$.attempt" and "union" in by_event["RolloutFinished"].reason


def test_removing_an_event_kind_is_reported(schemas_copy: Path) -> None:
    (schemas_copy / "TaskDispatched.avsc").unlink()
    assert [p.reason for p in check_backward_compatibility(schemas_copy)] == ["the event kind was removed"]


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        ("long", "int", True),
        ("int", "long", False),
        (["null", "string"], "string", True),
        ("string", ["null", "string"], False),
        ({"type": "array", "items": "double"}, {"type": "array", "items": "float"}, True),
        ({"type": "map", "values": "int"}, {"type": "map", "values": "string"}, False),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, {"type": "enum", "name": "E", "symbols": ["A", "B"]}, False),
    ],
)
def test_resolution_rules(reader: object, writer: object, ok: bool) -> None:
    assert (check_pair(reader, writer) == []) is ok
