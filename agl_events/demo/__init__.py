"""`make demo` / `agl-events demo`: a small agent trained end to end on the local broker, then the live view
compared with one rebuilt from offset 0.

Nothing is imported here: runner processes import the demo's agents (`demo.reverse`, `demo.tools`) through this
package, and `demo.run` would bring the trainer, its store server and FastAPI into each of them (~0.9 s of CPU
a runner at start-up)."""
