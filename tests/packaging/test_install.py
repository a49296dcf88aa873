"""A non-editable install (`pip install .`) works away from the repository.

The wheel must carry the event schemas and the broker's Maven project (mapped in from `schemas/` and
`deploy/kafka/` by pyproject.toml), and the installed CLI must fetch Kafka's jars into its home, run the
broker and serve the store from a directory with no checkout in sight.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from agl_events.proc.ports import free_port
from tests.eventually import eventually

REPO = Path(__file__).resolve().parents[2]
#: The data packages pyproject.toml maps in from elsewhere in the repository, and their folders there.
MAPPED = {"agl_events._schemas": "schemas", "agl_events._kafka": "deploy/kafka",
          "agl_events._registry": "deploy/registry"}
#: Build outputs and local state of a checkout: not what `pip install .` of a fresh clone sees.
NOT_SOURCE = (".git", ".venv", ".agl", "target", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
DEADLINE = 60.0

Environment = dict[str, str]


def _files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    """pyproject.toml lists its packages (discovery cannot add the mapped data folders): a new one must be added."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        ".".join(module.parent.relative_to(REPO).parts)
        for module in (REPO / "agl_events").rglob("*.py")
    }
    assert set(setuptools["packages"]) == folders | set(MAPPED)
    assert setuptools["package-dir"] == MAPPED


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean venv with agl-events built as a wheel from a copy of this checkout; returns its bin/.

    Its dependencies are this interpreter's, through a .pth file, so only the build backend may be downloaded.
    Python does not run the .pth files of a folder named that way, so this checkout's editable install
    (a .pth hook) stays out: agl_events can only come from the wheel.
    """
    root = tmp_path_factory.mktemp("packaging")
    source = root / "source"  # pip builds in the tree: keep build/ and *.egg-info out of the checkout
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(source)]
    built = subprocess.run(install, capture_output=True, text=True, check=False)
    assert built.returncode == 0, f"pip install of the checkout failed:\n{built.stdout}\n{built.stderr}"
    where = [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    site = Path(subprocess.run(where, check=True, capture_output=True, text=True).stdout.strip())
    dependencies = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    (site / "test_dependencies.pth").write_text("\n".join(dependencies) + "\n")
    return venv / "bin"


@pytest.fixture
def outside(tmp_path: Path, installed: Path) -> tuple[Path, Environment]:
    """A working directory away from the checkout, and an environment for the installed CLI with its own home."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "AGL_KAFKA_BOOTSTRAP")}
    env.update({
        "AGL_HOME": str(tmp_path / "home"),
        "AGL_KAFKA_PORT": str(free_port()),
        "AGL_KAFKA_CONTROLLER_PORT": str(free_port()),
    })
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    return cwd, env


def _python(bin_dir: Path, cwd: Path, env: Environment, code: str) -> str:
    result = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                            check=True)
    return result.stdout.strip()


def _cli(bin_dir: Path, cwd: Path, env: Environment, *arguments: str) -> str:
    """Run the installed `agl-events`; its stdout and stderr, after asserting that it succeeded."""
    result = subprocess.run([str(bin_dir / "agl-events"), *arguments], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, f"agl-events {' '.join(arguments)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def test_the_wheel_carries_the_schemas_and_the_maven_project(installed: Path,
                                                             outside: tuple[Path, Environment]) -> None:
    cwd, env = outside
    package = Path(_python(installed, cwd, env, "import agl_events; print(agl_events.__path__[0])"))
    assert package.is_relative_to(installed.parent), f"agl_events was imported from {package}, not from the wheel"
    assert _files(package / "_schemas") == _files(REPO / "schemas")
    kafka_project = {name for name in _files(REPO / "deploy" / "kafka") if not name.startswith("target/")}
    assert _files(package / "_kafka") == kafka_project
    assert _files(package / "_registry") == {"pom.xml"}
    # The faust workers come inside agl_events; no top-level `processors` package lands in site-packages.
    assert (package / "processors" / "views.py").is_file()
    site = Path(_python(installed, cwd, env, "import sysconfig; print(sysconfig.get_path('purelib'))"))
    assert not (site / "processors").exists()
    assert "reads all of its" in _cli(installed, cwd, env, "schemas", "check")
    # No repository, so no <repo>/.agl: without AGL_HOME the home is the user's.
    env_without_home = {**{k: v for k, v in env.items() if k != "AGL_HOME"}, "HOME": str(cwd)}
    home = _python(installed, cwd, env_without_home, "import agl_events.config as c; print(c.Settings.from_env().home)")
    assert home == str(cwd / ".agl")


@pytest.mark.kafka
@pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                    reason="the local broker needs Java 17+ and Maven")
def test_installed_cli_runs_broker_and_store_outside_the_repo(installed: Path,
                                                              outside: tuple[Path, Environment]) -> None:
    """Kafka's jars are fetched into the home (copied from ~/.m2, where a checkout's `make` left them)."""
    cwd, env = outside
    try:
        assert "Fetching Apache Kafka's jars with Maven" in _cli(installed, cwd, env, "kafka", "start")
        assert any(Path(env["AGL_HOME"], "kafka", "libs").glob("kafka_2.13-*.jar"))
        port = free_port()
        with _running([str(installed / "agl-events"), "store", "--port", str(port)], cwd, env) as store, \
                httpx.Client(base_url=f"http://127.0.0.1:{port}/v1/agl", timeout=10.0) as client:
            _wait_until(lambda: _answers(client, "/health"), store, "the store")
            # A rollout goes to Kafka and back into the store's view: the packaged schemas encode and decode.
            response = client.post("/queues/rollouts/enqueue", json={"rollouts": [{"input": {"task": 1}}]})
            assert response.status_code == 201, response.text
            rollout_id = response.json()[0]["rollout_id"]
            _wait_until(lambda: _rollout_ids(client) == [rollout_id], store, "the enqueued rollout")
    finally:
        assert "stopped" in _cli(installed, cwd, env, "kafka", "stop")


@contextlib.contextmanager
def _running(command: list[str], cwd: Path, env: Environment) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`command` in the background for the `with` block (with its log file), terminated afterwards."""
    log = cwd / "process.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=subprocess.STDOUT)
    try:
        yield process, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _answers(client: httpx.Client, path: str) -> bool:
    try:
        return client.get(path).status_code == 200
    except httpx.TransportError:
        return False


def _rollout_ids(client: httpx.Client) -> list[str]:
    return [rollout["rollout_id"] for rollout in client.get("/rollouts").json()["items"]]


def _wait_until(done: Callable[[], bool], running: tuple[subprocess.Popen[bytes], Path], what: str) -> None:
    """Until `done()`; fails at once if the process exits meanwhile, with its log either way."""
    process, log = running

    def alive_and_done() -> bool:
        assert process.poll() is None, f"the process exited while waiting for {what}:\n{log.read_text()}"
        return done()

    eventually(alive_and_done, what, within=DEADLINE, context=log.read_text)
