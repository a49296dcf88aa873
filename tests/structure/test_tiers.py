"""The tier check of tests/tiers.py, run by a pytest of its own on stand-in broker fixtures (no broker)."""

from __future__ import annotations

import pytest

CONFTEST = '''
import pytest
from tests.tiers import check_markers, require_kafka_marker

def pytest_collection_modifyitems(items):
    check_markers(items)

@pytest.fixture(scope="session")
def bootstrap():
    return "broker:9092"

@pytest.fixture
def experiment(bootstrap, request):
    require_kafka_marker(request.node)
    return "e1"

@pytest.fixture
def settings(experiment):
    return {"experiment": experiment}

@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def store(request):
    return request.getfixturevalue("settings") if request.param == "kafka" else {}
'''

INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

MARKED = '''
import pytest

pytestmark = pytest.mark.kafka

def test_direct(bootstrap): pass
def test_through_settings(settings): pass
'''


def test_a_test_reaching_the_broker_unmarked_fails_the_collection_by_name(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_marked=MARKED, test_mixed='''
import pytest

def test_unmarked_direct(bootstrap): pass
def test_unmarked_through_settings(settings): pass
@pytest.mark.kafka
def test_marked_here(settings): pass
def test_on_every_store(store): pass
def test_no_broker(tmp_path): pass
''')
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert "2 test(s) use the broker" in errors
    assert "test_mixed.py::test_unmarked_direct" in errors
    assert "test_mixed.py::test_unmarked_through_settings" in errors
    for fine in ("test_marked_here", "test_on_every_store", "test_no_broker", "test_direct", "test_through_settings"):
        assert fine not in errors


def test_marked_tests_collect_and_not_kafka_leaves_the_others(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_marked=MARKED, test_plain='''
def test_on_every_store(store): pass
def test_no_broker(tmp_path): pass
''')
    result = pytester.runpytest("-m", "not kafka", "-p", "no:cacheprovider")

    result.assert_outcomes(passed=2, deselected=3)
    result.stdout.fnmatch_lines(["*test_plain.py ..*"])


def test_an_unmarked_test_reaching_the_broker_at_run_time_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_late='''
def test_late(request):
    request.getfixturevalue("settings")
''')
    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_late.py::test_late reaches the broker without the `kafka` marker*"])
