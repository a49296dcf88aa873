"""Back-pressure and limits on a real server: bodies over the limit are a 413 before they are read, a gzip body
cannot inflate past it, the server serves the next request, and `/metrics` shows the bounded queues' waits."""

from __future__ import annotations

import gzip
import re
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx

from agl_events.server.limits import MAX_BODY_BYTES

AGL = "/v1/agl"
CHUNK = b" " * (1024 * 1024)  # JSON whitespace: a body that only its size makes wrong


def _still_serves(http: httpx.Client) -> None:
    response = http.post(f"{AGL}/rollouts", json={"input": "after"})
    assert response.status_code == 201, response.text


def test_a_declared_length_over_the_limit_is_a_413_before_the_body_is_read(http: httpx.Client) -> None:
    url = urlsplit(str(http.base_url))
    with socket.create_connection((url.hostname, url.port), timeout=10) as conn:
        # A gigabyte announced, two bytes sent: the answer cannot wait for the rest.
        conn.sendall(b"POST /v1/agl/rollouts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000000000\r\n\r\n{}")
        answer = b""
        while b"}" not in answer:
            part = conn.recv(65536)
            assert part, answer
            answer += part
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b"request body too large: 1000000000 bytes; the limit is %d bytes" % MAX_BODY_BYTES in body
    _still_serves(http)


def test_a_streamed_body_is_cut_off_past_the_limit_with_a_413_on_json_and_otlp_routes(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked
        yield b'{"input": "x"'
        for _ in range(MAX_BODY_BYTES // len(CHUNK) + 2):
            yield CHUNK
        yield b"}"

    for path, content_type in ((f"{AGL}/rollouts", "application/json"), ("/v1/traces", "application/x-protobuf")):
        response = http.post(path, content=chunks(), headers={"Content-Type": content_type}, timeout=60)
        assert response.status_code == 413, (path, response.text[:300])
        assert response.json() == {"detail": f"request body too large: a streamed body; the limit is {MAX_BODY_BYTES}"
                                             " bytes", "error_type": "RequestBodyTooLarge"}
        _still_serves(http)


def test_a_gzip_body_that_inflates_past_the_limit_is_refused_without_inflating_it(http: httpx.Client) -> None:
    bomb = gzip.compress(b"\0" * (MAX_BODY_BYTES + 1024 * 1024))  # about 40 KB on the wire
    response = http.post("/v1/traces", content=bomb, headers={"Content-Type": "application/x-protobuf",
                                                               "Content-Encoding": "gzip"})
    assert response.status_code == 400
    assert f"inflates past the limit of {MAX_BODY_BYTES} bytes".encode() in response.content  # an OTLP Status
    _still_serves(http)


def test_metrics_show_the_write_paths_back_pressure_by_queue(http: httpx.Client) -> None:
    _still_serves(http)  # opens the default experiment's store
    text = http.get("/metrics").text
    for name in ("agl_store_backpressure_waits_total", "agl_store_backpressure_wait_seconds_total"):
        assert f"# TYPE {name} counter" in text
        assert re.search(rf'^{name}{{experiment="default",queue="committer"}} 0\.0$', text, re.MULTILINE), text
    queues = set(re.findall(r'^agl_store_backpressure_waits_total\{experiment="default",queue="(\w+)"\}', text,
                            re.MULTILINE))
    assert queues in ({"committer"}, {"committer", "producer", "tasks_producer"})  # memory / Kafka store
