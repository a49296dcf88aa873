"""Cooperative stop: a RunnersStopRequested event on the control topic reaches every runner."""

from __future__ import annotations

import threading

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.log.consumer import GroupConsumer, Start
from agl_events.log.records import NewEvent, event
from agl_events.topics import Topic, topic_name


def stop_request(producer_id: str, time: float, worker_id: str | None = None, reason: str = "") -> NewEvent:
    return event("RunnersStopRequested", worker_id or "*", time, producer_id, worker_id=worker_id, reason=reason)


class StopWatcher:
    """Follows the control topic from its end (only requests made after the runner started count)."""

    def __init__(self, bootstrap: str, experiment: str, codec: AvroCodec, runner_id: str,
                 stop: threading.Event) -> None:
        self._codec = codec
        self._runner_id = runner_id
        self._stop = stop
        self._consumer = GroupConsumer(bootstrap, f"agl-stop-{runner_id}", "control")
        self._consumer.assign(topic_name(experiment, Topic.CONTROL), Start.END)
        self._thread = threading.Thread(target=self._watch, name=f"{runner_id}-stop", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            for record in self._consumer.consume(1, 0.2):
                try:
                    decoded = self._codec.decode(record.value or b"")
                except CodecError:
                    continue
                if decoded.name == "RunnersStopRequested" and decoded.record["worker_id"] in (None, self._runner_id):
                    self._stop.set()
        self._consumer.close()
