"""The REST paths of the store API (under `/v1/agl`) that more than one side calls, each written once.

The server declares its routes with them (`server.routes`), a store of a group forwards commands to a
rollout's owner through them (`store.forwarding`), and our client calls them (`server.client`): a path
changed here changes on all three sides. Paths follow FastAPI's syntax (`{name}`, `{name:path}`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

_PARAMETER = re.compile(r"\{(\w+)(?::\w+)?\}")


@dataclass(frozen=True)
class Route:
    method: str
    path: str

    def url(self, **params: str) -> str:
        """The path with its parameters filled in, each quoted as one path segment."""
        return _PARAMETER.sub(lambda m: quote(str(params[m.group(1)]), safe=""), self.path)


# -- commands a store of a group forwards to the rollout's owner (the client sends them too) ---------------
ENQUEUE = Route("POST", "/queues/rollouts/enqueue")
DEQUEUE = Route("POST", "/queues/rollouts/dequeue")
START_ROLLOUT = Route("POST", "/rollouts")
UPDATE_ROLLOUT = Route("POST", "/rollouts/{rollout_id}")
START_ATTEMPT = Route("POST", "/rollouts/{rollout_id}/attempts")
UPDATE_ATTEMPT = Route("POST", "/rollouts/{rollout_id}/attempts/{attempt_id}")
FINISH_ATTEMPT = Route("POST", "/rollouts/{rollout_id}/attempts/{attempt_id}/finish")
CLAIM = Route("POST", "/rollouts/{rollout_id}/claim")
CLAIMS = Route("POST", "/claims")
FINISH_ATTEMPTS = Route("POST", "/attempts/finish")
ADD_SPAN = Route("POST", "/spans")
NEXT_SEQUENCE_ID = Route("POST", "/spans/next")

# -- reads a store of a group asks the rollout's owner (or, for all rollouts, every member) ----------------
GET_ROLLOUT = Route("GET", "/rollouts/{rollout_id}")
SEARCH_ROLLOUTS = Route("POST", "/rollouts/search")
SEARCH_ATTEMPTS = Route("POST", "/rollouts/{rollout_id}/attempts/search")
LATEST_ATTEMPT = Route("GET", "/rollouts/{rollout_id}/attempts/latest")
SEARCH_SPANS = Route("POST", "/spans/search")
WAIT_ROLLOUTS = Route("POST", "/waits/rollouts")
FIND_TASK_REQUESTS = Route("POST", "/task-requests/find")

# -- reads and other calls our client makes ---------------------------------------------------------------
STATISTICS = Route("GET", "/statistics")
QUERY_ROLLOUTS = Route("GET", "/rollouts")
QUERY_ATTEMPTS = Route("GET", "/rollouts/{rollout_id}/attempts")
QUERY_SPANS = Route("GET", "/spans")
QUERY_RESOURCES = Route("GET", "/resources")
LATEST_RESOURCES = Route("GET", "/resources/latest")
GET_RESOURCES = Route("GET", "/resources/{resources_id}")
QUERY_WORKERS = Route("GET", "/workers")
UPDATE_WORKER = Route("POST", "/workers/{worker_id}")
TASK_REQUEST = Route("GET", "/task-requests/{key:path}")
PROMPT_CANDIDATES = Route("GET", "/prompt-candidates")
