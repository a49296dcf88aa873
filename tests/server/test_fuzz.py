"""Fuzzing the REST API from its own OpenAPI document (schemathesis) against the live server on the broker.

Every operation of `/openapi.json` (the store routes at the root and under `/experiments/{experiment}`, OTLP,
health) gets schema-valid and schema-violating requests over real HTTP on loopback, to a uvicorn server over
real Kafka stores. Each response must: not be a 5xx; carry a message if it is a 4xx (a JSON `detail`/`error`,
or an OTLP `google.rpc.Status` with a message); and match the document (status, content type, schema). Then
the store must still serve upstream's client. Seeded and unshrunk, so a run is reproducible and bounded;
every failure found is reported at the end (with its curl command), not just the first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from google.rpc.status_pb2 import Status
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agl_events.config import Settings
from agl_events.server.experiments import EXPERIMENT_PREFIX
from agl_events.store.contract import LightningStore
from agl_events.store.kafka import KafkaLightningStore
from tests.server.conftest import RunningServer, StoreFor

pytestmark = pytest.mark.kafka

#: The experiment every `/experiments/{experiment}` request names (the root serves `default`).
FUZZ_EXPERIMENT = "fuzz"
#: Examples per operation and generation mode (positive: valid per the document; negative: violating it).
EXAMPLES = 40
#: Examples for a root operation that is also served under `/experiments/{experiment}`: the same router (the
#: same handlers, parameters and models) is mounted at both prefixes, so the prefixed copy gets EXAMPLES and its
#: root alias only enough to show the alias is wired to the document too.
ALIAS_EXAMPLES = 4
SEED = 14
#: Seconds one request may take; a long poll or a stuck append fails the run instead of hanging it.
REQUEST_TIMEOUT = 30

schemathesis.serializer.alias("application/x-protobuf", "application/octet-stream")  # OTLP bodies: raw bytes


#: OTLP signals upstream answers 501 (not implemented), as its document says: the one 5xx that is the contract.
NOT_IMPLEMENTED_SIGNALS = ("/v1/metrics", "/v1/logs", "/v1/development/profiles")


def no_server_error(ctx: Any, response: Any, case: Any) -> None:
    """schemathesis' `not_a_server_error`, but for the 501 of the OTLP signals the server does not take."""
    if response.status_code == 501 and case.operation.path.endswith(NOT_IMPLEMENTED_SIGNALS):
        return
    not_a_server_error(ctx, response, case)


def error_has_message(_: Any, response: Any, case: Any) -> None:
    """A 4xx (or a 501) must say why: a non-empty `detail` or `error` in JSON, or an OTLP Status with a message."""
    if not 400 <= response.status_code < 500 and response.status_code != 501:
        return
    if response.headers.get("content-type", [""])[0].startswith("application/x-protobuf"):
        message = Status.FromString(response.content).message
    else:
        try:
            body = json.loads(response.content)
        except ValueError as exc:
            raise AssertionError(f"{response.status_code} without a JSON body: {response.content[:200]!r}") from exc
        message = body.get("detail") or body.get("error") if isinstance(body, dict) else None
    if not message:
        raise AssertionError(f"{response.status_code} without a message: {response.content[:200]!r}")


CHECKS = [no_server_error, error_has_message, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.fixture
def fuzz_server(start_server: Callable[[StoreFor], RunningServer], settings: Settings, tmp_path: Path
                ) -> Iterator[RunningServer]:
    """A server whose `default` and `fuzz` experiments are Kafka stores on the test broker; other names are
    refused (400) rather than each opening topics of its own."""
    served = {"default", FUZZ_EXPERIMENT}

    async def store_for(experiment: str) -> LightningStore:
        if experiment not in served:
            raise ValueError(f"the fuzz server serves experiments {sorted(served)} only")
        scoped = settings.model_copy(update={"experiment": f"{settings.experiment}-{experiment}"})
        return await KafkaLightningStore.open(  # type: ignore[return-value]
            scoped, view_dir=tmp_path / "views" / experiment, scan_debounce_seconds=0)

    yield start_server(store_for)


def examples_for(operations: list[Any]) -> dict[str, int]:
    """Operation label -> examples per mode: ALIAS_EXAMPLES for a root alias of a prefixed operation."""
    prefixed = {f"{o.method.upper()} {o.path.removeprefix(EXPERIMENT_PREFIX)}" for o in operations
                if o.path.startswith(EXPERIMENT_PREFIX)}
    return {o.label: ALIAS_EXAMPLES if o.label in prefixed else EXAMPLES for o in operations}


def fuzz_operation(operation: Any, mode: GenerationMode, examples: int, base_url: str, session: requests.Session,
                   failures: dict[str, str]) -> int:
    """Send `examples` generated requests for `operation`; record the first failure of each kind. Returns the
    number of requests sent."""
    fixed = {"experiment": FUZZ_EXPERIMENT} if "experiment" in operation.path_parameters else None
    sent = 0

    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=fixed))
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seed(SEED)
    def fuzz(case: Any) -> None:
        nonlocal sent
        response = case.call(base_url=base_url, session=session, timeout=REQUEST_TIMEOUT)
        sent += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as group:
            for failure in group.exceptions:
                failures.setdefault(f"{operation.label} [{mode.value}] {failure.title}", str(group))

    try:
        fuzz()
    except Unsatisfiable:
        # Negative mode, on an operation whose inputs are all free strings (or absent): nothing violates them.
        assert mode is GenerationMode.NEGATIVE, f"{operation.label}: no valid request can be generated"
    return sent


async def test_fuzzing_every_operation_finds_no_server_error(fuzz_server: RunningServer) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    examples = examples_for(operations)
    failures: dict[str, str] = {}
    started = time.monotonic()
    with requests.Session() as session:
        sent = sum(fuzz_operation(operation, mode, examples[operation.label], fuzz_server.url, session, failures)
                   for operation in operations for mode in GenerationMode)
    print(f"fuzzed {len(operations)} operations with {sent} requests in {time.monotonic() - started:.0f} s")
    assert len(operations) >= 74  # the store routes twice (root, experiment), OTLP twice, health, metrics
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(
        f"--- {key}\n{report}" for key, report in sorted(failures.items()))

    # The store still serves normal requests, through upstream's own client.
    from agentlightning.store.client_server import LightningStoreClient

    client = LightningStoreClient(fuzz_server.url, retry_delays=(0.05,), health_retry_delays=(0.05,))
    try:
        rollout = await client.enqueue_rollout(input={"after": "fuzzing"})
        found = await client.query_rollouts(rollout_id_in=[rollout.rollout_id])
        assert [r.input for r in found] == [{"after": "fuzzing"}]
    finally:
        await client.close()
