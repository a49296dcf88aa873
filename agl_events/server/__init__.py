"""REST server over any `LightningStore`, wire-compatible with Agent Lightning 0.3.0's `LightningStoreClient`.

`server.app.create_app(store_for)` serves the default experiment at the root and every experiment under
`/experiments/<name>`; `server.app.serve(app, host, port)` runs it with uvicorn. The package itself imports
nothing: `server.client`, which every runner and CLI command uses, must not pay for FastAPI's import (~0.8 s).
"""
