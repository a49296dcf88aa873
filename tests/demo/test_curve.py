"""The learning curve's files: a CSV row per step, an SVG any browser can open."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from agl_events.demo.curve import curve_csv, write_curve

SVG = "{http://www.w3.org/2000/svg}"


def test_the_csv_has_a_row_per_step_with_blanks_where_a_series_has_no_point() -> None:
    assert curve_csv([0.1, 0.25], [(0, 0.15), (2, 0.5)]).splitlines() == [
        "step,train_reward,held_out_reward", "0,,0.1500", "1,0.1000,", "2,0.2500,0.5000"]


def test_the_svg_draws_both_series_on_a_zero_to_one_axis(tmp_path: Path) -> None:
    svg = write_curve(tmp_path / "out", [0.0, 0.5, 1.0], [(0, 0.0), (3, 1.0)], "a & b")
    assert (tmp_path / "out" / "curve.csv").is_file()
    root = ET.fromstring(svg.read_text())  # well-formed, the title's "&" escaped
    lines = root.findall(f"{SVG}polyline")
    assert [len(line.get("points", "").split()) for line in lines] == [3, 2]
    held_out = [tuple(map(float, p.split(","))) for p in lines[1].get("points", "").split()]
    (x0, y0), (x1, y1) = held_out
    assert x0 < x1 and y0 > y1  # later step to the right, higher reward up
