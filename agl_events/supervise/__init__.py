"""`agl-events up | status | down`: an experiment's processes on one machine, supervised.

`plan` (what to run, from the options), `backoff` (when to restart a crashed process) and `view` (the status
tables) are pure; `child` (a process with its log), `supervisor` (the loop that starts, restarts and stops
them), `launch` (up and down from the command line) and `snapshot` (what status reads from Kafka and the
stores) do the work.
"""
