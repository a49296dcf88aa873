"""Lines as keyed task requests: the key from a field or a hash, every rejection explained."""

from __future__ import annotations

import json

import pytest

from agl_events.events.task_request import InvalidTaskRequest
from agl_events.produce.lines import line_key, parse_line, parse_lines


def test_the_default_key_is_a_hash_of_the_line_so_a_repeated_line_is_one_task() -> None:
    first, second, other = (parse_line(n, line) for n, line in
                            enumerate(['{"input": 1}', '  {"input": 1} ', '{"input": 2}'], start=1))
    assert first.key == second.key == line_key('{"input": 1}')
    assert other.key != first.key and len(first.key) == 32


def test_a_top_level_key_field_is_taken_out_of_the_request() -> None:
    line = parse_line(3, json.dumps({"id": "task-7", "input": {"q": 1}, "mode": "val"}), key_field="id")
    assert (line.number, line.key) == (3, "task-7")
    assert line.request.model_dump(exclude_none=True) == {"input": {"q": 1}, "mode": "val"}


def test_a_key_field_inside_the_request_stays_there() -> None:
    line = parse_line(1, json.dumps({"input": 1, "metadata": {"task_id": 42}}), key_field="metadata.task_id")
    assert line.key == "42"
    assert line.request.metadata == {"task_id": 42}


@pytest.mark.parametrize(("data", "why"), [
    ({"input": 1}, "no key field 'id'"),
    ({"id": "", "input": 1}, "must be a non-empty string or an integer"),
    ({"id": {"a": 1}, "input": 1}, "must be a non-empty string or an integer"),
    ({"id": True, "input": 1}, "must be a non-empty string or an integer"),
    (["id"], "expected a JSON object"),
])
def test_a_line_without_a_usable_key_is_rejected(data: object, why: str) -> None:
    with pytest.raises(InvalidTaskRequest, match=why):
        parse_line(1, json.dumps(data), key_field="id")


def test_parse_lines_numbers_lines_as_the_file_does_and_says_why_each_is_rejected() -> None:
    parsed = dict(parse_lines(["{not json", "", json.dumps(["a"]), json.dumps({"inptu": 1}), '{"input": {"q": 1}}']))
    assert set(parsed) == {1, 3, 4, 5}  # the blank line is skipped, numbering is the file's
    assert str(parsed[1]).startswith("not JSON")
    assert "expected a JSON object" in str(parsed[3])
    assert "inptu" in str(parsed[4]) and "input" in str(parsed[4])
    five = parsed[5]
    assert not isinstance(five, str) and five.request.input == {"q": 1}
