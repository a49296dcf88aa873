"""REST server over any `LightningStore`, wire-compatible with Agent Lightning 0.3.0's `LightningStoreClient`.

`create_app(store_for)` serves the default experiment at the root and every experiment under
`/experiments/<name>`; `serve(app, host, port)` runs it with uvicorn.
"""

from agl_events.server.app import DEFAULT_PORT, create_app, serve
from agl_events.server.routes import create_agl_router, fixed_store

__all__ = ["DEFAULT_PORT", "create_agl_router", "create_app", "fixed_store", "serve"]
