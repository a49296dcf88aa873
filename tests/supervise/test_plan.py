"""The plan of `agl-events up`: which processes, on which ports and folders, each store's runners (pure)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pydantic import ValidationError

from agl_events.supervise.plan import STOP_ORDER, Kind, Plan, UpOptions, build_plan


def _options(**given: object) -> UpOptions:
    return UpOptions.model_validate({"store_port": 4747, **given})


def _plan(options: UpOptions, advertise: bool = False) -> Plan:
    ports = itertools.count(7000)
    return build_plan(options, experiment="e1", bootstrap="kafka:9092", home=Path("/h"), folder=Path("/h/up/e1"),
                      free_port=lambda: next(ports), advertise=advertise)


def test_stores_take_consecutive_ports_and_runners_spread_over_them() -> None:
    plan = _plan(_options(stores=3, runners=5, processors=2, agent="m:a", store_port=5000))
    stores = plan.of_kind(Kind.STORE)
    assert [s.port for s in stores] == [5000, 5001, 5002]
    assert [s.name for s in plan.processes] == ["store-0", "store-1", "store-2", "processor-0", "processor-1",
                                                "samples", "runner-0", "runner-1", "runner-2", "runner-3", "runner-4"]
    urls = [r.args[r.args.index("--store-url") + 1] for r in plan.of_kind(Kind.RUNNER)]
    assert urls == [f"http://127.0.0.1:{p}" for p in (5000, 5001, 5002, 5000, 5001)]
    assert [r.args[r.args.index("--name") + 1] for r in plan.of_kind(Kind.RUNNER)] == [f"runner-{i}" for i in range(5)]


def test_every_process_has_its_own_folder_and_web_port() -> None:
    plan = _plan(_options(stores=2, processors=2, runners=0))
    folders = [spec.args[spec.args.index(flag) + 1] for spec in plan.processes
               for flag in ("--views", "--data-dir") if flag in spec.args]
    assert len(folders) == len(set(folders)) == 5 and all(f.startswith("/h/up/e1/") for f in folders)
    web = [spec.port for spec in plan.processes if spec.kind in (Kind.PROCESSOR, Kind.SAMPLES)]
    assert web == [7000, 7001, 7002]


def test_commands_name_the_cluster_experiment_and_home() -> None:
    plan = _plan(_options(runners=1, agent="m:a", samples=False, processors=0))
    assert plan.command(plan.processes[0], "py")[:9] == ["py", "-m", "agl_events", "--bootstrap", "kafka:9092",
                                                         "--experiment", "e1", "--home", "/h"]
    assert plan.log_file("runner-0") == Path("/h/up/e1/logs/runner-0.log")


def test_advertise_url_only_when_the_store_takes_it(tmp_path: Path) -> None:
    assert "--advertise-url" not in _plan(_options(runners=0)).processes[0].args
    args = _plan(_options(runners=0, stores=2, store_port=6000), advertise=True).processes[1].args
    assert args[args.index("--advertise-url") + 1] == "http://127.0.0.1:6001"


def test_proxy_talks_to_the_first_store(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("model_list: []\n")
    [proxy] = _plan(_options(runners=0, proxy=True, model_list=models, proxy_port=4100, store_port=4800)
                    ).of_kind(Kind.PROXY)
    assert proxy.port == 4100
    assert proxy.args[proxy.args.index("--store-url") + 1] == "http://127.0.0.1:4800"


@pytest.mark.parametrize(("options", "message"), [
    ({"runners": 1}, "runners need an agent"),
    ({"runners": 0, "proxy": True}, "--proxy needs --model-list"),
    ({"runners": 0, "stores": 3, "store_port": 65534}, "past port 65535"),
])
def test_incomplete_options_say_what_is_missing(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _options(**options)


def test_runners_stop_first_and_stores_last() -> None:
    assert STOP_ORDER[0] == Kind.RUNNER and STOP_ORDER[-1] == Kind.STORE and set(STOP_ORDER) == set(Kind)
