"""Process tools shared by the local broker, the supervisor of `agl-events up`, the chaos run, the Trainer's
helpers and the tests: child processes (`child`), pids (`pids`), ports (`ports`), log files (`logs`) and file
locks (`locks`). Standard library only, so anything may use them without pulling in Kafka or HTTP.
"""
