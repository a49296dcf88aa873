"""`agl-events up | status | down`: an experiment's processes on one machine, supervised.

Pure: `plan` (what to run, from the options), `backoff` (when to start a crashed process again), `state` (what
the supervisor records and status shows) and `view` (status's tables). The work: `child` (a process with its
log), `paths` (the experiment's files and the supervisor's pid), `supervisor` (the loop that starts, restarts and
stops), `launch` (up and down from the command line) and `snapshot` (what status reads from Kafka and a store).
"""
