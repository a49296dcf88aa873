"""`/ui` in headless Chromium (Debian's `chromium`): after a known workload, the page shows the expected numbers,
in its DOM and in a screenshot read back by OCR (Debian's `tesseract-ocr`), with the reward curve drawn.

Without the two programs the test is skipped (a laptop), unless AGL_REQUIRE_BROWSER=1 (`.ci/run` sets it and
installs both), where it fails instead.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from agl_events.algorithm.metrics import TrainerMetrics
from agl_events.config import Settings
from agl_events.samples.batching import SampleBatch
from agl_events.samples.model import Sample
from agl_events.server.auth import AuthTokens
from agl_events.server.embedded import serving
from agl_events.store.kafka import KafkaLightningStore
from tests.conftest import FakeClock
from tests.eventually import eventually_async
from tests.server.known_workload import FAILED, QUEUED, SUCCEEDED, run_known_workload

pytestmark = pytest.mark.kafka

CHROMIUM, TESSERACT = "/usr/bin/chromium", "tesseract"
#: Flags that work as root in a container, with no network and no first-run chores.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1280,900", "--virtual-time-budget=5000")
TOKEN = "ui-secret"
CURVE_RGB = (0x1F, 0x5F, 0xBF)  # the reward curve's colour in ui.html
TRAINER_STEPS = 2


def _browser_or_skip() -> None:
    missing = [name for name, found in (("chromium (Debian package chromium)", Path(CHROMIUM).exists()),
                                        ("tesseract (Debian package tesseract-ocr)", shutil.which(TESSERACT)))
               if not found]
    if missing and os.environ.get("AGL_REQUIRE_BROWSER") == "1":
        pytest.fail(f"AGL_REQUIRE_BROWSER=1 but missing: {', '.join(missing)}")
    if missing:
        pytest.skip(f"needs {' and '.join(missing)}: apt-get install -y chromium tesseract-ocr")


async def _run(*command: str) -> bytes:
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, f"{command[0]} failed: {err.decode(errors='replace')[-2000:]}"
    return out


async def chromium(tmp_path: Path, url: str, *action: str) -> bytes:
    """Chromium on `url` with a fresh profile; the page's JS runs through 5 s of virtual time first."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return await _run(CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *action, url)


@pytest.fixture
async def ui_url(settings: Settings, tmp_path: Path, clock: FakeClock) -> AsyncIterator[str]:
    """The experiment's /ui on a real server (the store on the broker, tokens required), after the workload."""
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", scan_debounce_seconds=3600,
                                           clock=clock)
    trainer = TrainerMetrics(settings.experiment)
    async with serving(store, settings.experiment, auth=AuthTokens(TOKEN), trainer=trainer) as url:
        await run_known_workload(store, clock)
        for _ in range(TRAINER_STEPS):
            trainer.observe_batch(SampleBatch(groups=[[Sample(sample_id="s", rollout_id="r", attempt_id="a",
                                                              group_id="g", status="succeeded", adapter="x",
                                                              triplets=[], final_reward=0.8)]]))
        async with httpx.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async def folded() -> bool:
                """What the page is asserted to show once folded: the curve and no lag, every attempt and finish
                folded (the lag, from cached log ends, can read 0 before a partition's last records arrive)."""
                data = (await http.get(f"{url}/ui/data.json")).json()
                applied = data["events_applied"]
                return (sum(p["rollouts"] for p in data["reward_curve"]) == SUCCEEDED
                        and applied.get("AttemptCreated") == applied.get("RolloutFinished") == SUCCEEDED + FAILED
                        and not any(data["consumer_lag"].values()))

            await eventually_async(folded, "the follower folded the workload")
        yield f"{url}/ui?token={TOKEN}"


async def test_the_page_shows_the_workload_in_chromium_and_in_its_screenshot(ui_url: str, tmp_path: Path) -> None:
    _browser_or_skip()
    dom = (await chromium(tmp_path, ui_url, "--dump-dom")).decode()
    shown = dict(re.findall(r'id="([a-z-]+)"[^>]*>([^<]*)<', dom))
    assert (shown["status-succeeded"], shown["status-failed"], shown["status-queuing"]) == (
        str(SUCCEEDED), str(FAILED), str(QUEUED))
    assert (shown["dlq"], shown["lag"], shown["resources"], shown["trainer-step"]) == ("0", "0", "2",
                                                                                       str(TRAINER_STEPS))
    assert re.findall(r'class="reward"[^>]*>([^<]*)<', dom) == ["0.20", "0.80"]

    screenshot = tmp_path / "ui.png"
    await chromium(tmp_path, ui_url, f"--screenshot={screenshot}")
    text = (await _run(TESSERACT, str(screenshot), "-", "--psm", "11")).decode()
    words = text.split()
    read = dict(itertools.pairwise(words))  # a word -> the word read after it
    assert (read.get("succeeded"), read.get("failed")) == (str(SUCCEEDED), str(FAILED)), words
    assert "0.20" in words and "0.80" in words, words  # the curve's labels (OCR misreads lone big zeros: not those)

    # The curve: its colour in the chart, rising from left (v1, 0.2) to right (v2, 0.8).
    with Image.open(screenshot) as image:
        rgb = image.convert("RGB")
    width, pixels = rgb.width, rgb.tobytes()
    points = [(i // 3 % width, i // 3 // width) for i in range(0, len(pixels), 3)
              if pixels[i:i + 3] == bytes(CURVE_RGB)]
    assert len(points) > 500, "the reward curve is drawn"
    leftmost, rightmost = min(points), max(points)
    assert rightmost[0] - leftmost[0] > width / 2 and rightmost[1] < leftmost[1], "it rises left to right"


async def test_the_page_and_its_data_take_the_token_as_query_parameter_and_nothing_else_does(
        ui_url: str) -> None:
    base = ui_url.split("/experiments/")[0]
    experiment = ui_url.split("/experiments/")[1].split("/")[0]
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        for path in ("/ui", "/ui/data.json", f"/experiments/{experiment}/ui",
                     f"/experiments/{experiment}/ui/data.json"):
            assert (await http.get(path)).status_code == 401
            assert (await http.get(path, params={"token": "wrong"})).status_code == 401
            assert (await http.get(path, params={"token": TOKEN})).status_code == 200
        assert (await http.get("/v1/agl/rollouts", params={"token": TOKEN})).status_code == 401
        assert (await http.get("/metrics", params={"token": TOKEN})).status_code == 401
        page = await http.get("/ui", params={"token": TOKEN})
    assert "<script>" in page.text and re.search(r"\b(src|href)\s*=|<link|@import|url\(", page.text) is None, (
        "no external resource: the page is self-contained")
