"""Which answers to a committed-offsets fetch are asked again (`log.consumer.is_permanent`): a fresh broker's
NOT_COORDINATOR and a timed-out ask pass with time; a refused principal does not (tests/secure has the real one)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from agl_events.log.consumer import is_permanent


@pytest.mark.parametrize("code", [KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                  KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
                                  KafkaError.UNSTABLE_OFFSET_COMMIT])
def test_a_transient_answer_is_asked_again(code: int) -> None:
    assert not is_permanent(KafkaError(code))


@pytest.mark.parametrize("code", [KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                  KafkaError.SASL_AUTHENTICATION_FAILED])
def test_a_refused_principal_is_not_asked_again(code: int) -> None:
    assert is_permanent(KafkaError(code))
