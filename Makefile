# Two commands for a newcomer: `make test` and `make demo`. Everything else is what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
KAFKA_LIBS := deploy/kafka/target/libs/.fetched

# The test run gets its own broker (own data folder and ports) so it never touches a broker
# you started for development, and always stops what it started.
TEST_ENV := AGL_HOME=$(CURDIR)/.agl/test AGL_KAFKA_PORT=19092 AGL_KAFKA_CONTROLLER_PORT=19093 \
            LITELLM_LOCAL_MODEL_COST_MAP=True
PYTEST_ARGS ?=
# Two pytest workers (pytest-xdist), each test file on one worker: most tests wait on the broker or on
# subprocesses, so two share the 2 cores well (three were slower than two); PYTEST_WORKERS=0 runs them in one.
PYTEST_WORKERS ?= 2

.PHONY: install broker test demo lint clean

$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

$(KAFKA_LIBS): deploy/kafka/pom.xml
	@command -v java >/dev/null || { echo "Java 17+ is required to run the Kafka broker"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the Kafka broker"; exit 1; }
	rm -rf deploy/kafka/target/libs
	mvn -q -B -f deploy/kafka/pom.xml dependency:copy-dependencies
	touch $@

install: $(INSTALLED) $(KAFKA_LIBS)

broker: install
	$(BIN)/agl-events kafka start

test: install
	$(TEST_ENV) $(BIN)/agl-events kafka start
	$(TEST_ENV) $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS); rc=$$?; \
	  $(TEST_ENV) $(BIN)/agl-events kafka stop; exit $$rc

demo: install
	$(BIN)/agl-events demo

lint: install
	$(BIN)/ruff check agl_events tests

clean:
	-$(BIN)/agl-events kafka stop
	rm -rf $(VENV) .agl deploy/kafka/target deploy/registry/target
