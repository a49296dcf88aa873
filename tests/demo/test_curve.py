"""The learning curve's files: a CSV row per step, a PNG that shows both series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colors, image

from agl_events.demo.curve import HELD_OUT_COLOUR, TRAIN_COLOUR, curve_csv, write_curve


def test_the_csv_has_a_row_per_step_with_blanks_where_a_series_has_no_point() -> None:
    assert curve_csv([0.1, 0.25], [(0, 0.15), (2, 0.5)]).splitlines() == [
        "step,train_reward,held_out_reward", "0,,0.1500", "1,0.1000,", "2,0.2500,0.5000"]


def _pixels_of(picture: np.ndarray, colour: str) -> np.ndarray:
    """(row, column) of the pixels drawn in `colour`."""
    return np.argwhere(np.abs(picture[..., :3] - np.array(colors.to_rgb(colour))).max(axis=-1) < 0.02)


def test_the_png_draws_the_held_out_curve_rising_left_to_right_beside_the_training_one(tmp_path: Path) -> None:
    png = write_curve(tmp_path / "out", [0.0, 0.5, 1.0], [(0, 0.0), (3, 1.0)], "a & b")
    assert (tmp_path / "out" / "curve.csv").is_file() and png.read_bytes()[:4] == b"\x89PNG"
    picture = image.imread(png)
    assert picture.shape[:2] == (540, 960)
    held_out, train = _pixels_of(picture, HELD_OUT_COLOUR), _pixels_of(picture, TRAIN_COLOUR)
    assert len(held_out) > 100 and len(train) > 50
    plot = held_out[held_out[:, 1] < 700]  # leave out the legend, bottom right
    left, right = plot[plot[:, 1] < np.median(plot[:, 1])], plot[plot[:, 1] >= np.median(plot[:, 1])]
    assert left[:, 0].mean() > right[:, 0].mean()  # higher reward is further up (smaller row) on the right
