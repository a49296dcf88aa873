"""A learning curve as files: CSV for tools, SVG for eyes (any browser opens it; no plotting library needed).

Pure: points in, text out. Two series on one 0-1 reward axis: the mean training reward of every step's
batch (sampled at temperature 1) and the held-out mean reward of the greedy evaluations.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

WIDTH, HEIGHT, MARGIN = 640, 360, 48


def curve_csv(train: Sequence[float], held_out: Sequence[tuple[int, float]]) -> str:
    """`step,train_reward,held_out_reward`: one row per step (0 = before training), blanks where none."""
    evals = dict(held_out)
    rows = ["step,train_reward,held_out_reward"]
    for step in range(max([len(train), *evals]) + 1 if train or evals else 0):
        trained = f"{train[step - 1]:.4f}" if 0 < step <= len(train) else ""
        rows.append(f"{step},{trained},{f'{evals[step]:.4f}' if step in evals else ''}")
    return "\n".join(rows) + "\n"


def curve_svg(train: Sequence[float], held_out: Sequence[tuple[int, float]], title: str) -> str:
    """Both series against the step, with axes, ticks and a legend."""
    last = max([len(train), *(step for step, _ in held_out), 1])

    def x(step: float) -> float:
        return MARGIN + (WIDTH - 2 * MARGIN) * step / last

    def y(reward: float) -> float:
        return HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * reward

    def line(points: list[tuple[float, float]], colour: str) -> str:
        path = " ".join(f"{x(s):.1f},{y(r):.1f}" for s, r in points)
        dots = "".join(f'<circle cx="{x(s):.1f}" cy="{y(r):.1f}" r="3" fill="{colour}"/>' for s, r in points)
        return f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>{dots}'

    ticks = "".join(f'<line x1="{MARGIN}" y1="{y(r):.1f}" x2="{WIDTH - MARGIN}" y2="{y(r):.1f}" stroke="#ddd"/>'
                    f'<text x="{MARGIN - 8}" y="{y(r) + 4:.1f}" text-anchor="end">{r:.1f}</text>'
                    for r in (0.0, 0.25, 0.5, 0.75, 1.0))
    steps = "".join(f'<text x="{x(s):.1f}" y="{HEIGHT - MARGIN + 18}" text-anchor="middle">{s}</text>'
                    for s in sorted({0, last, *(step for step, _ in held_out)}))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" '
            f'font-size="12"><rect width="100%" height="100%" fill="white"/>{ticks}{steps}'
            f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>'
            f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle">GRPO step</text>'
            + line([(i + 1, r) for i, r in enumerate(train)], "#9ab")
            + line([(float(s), r) for s, r in held_out], "#c33")
            + f'<text x="{WIDTH - MARGIN}" y="{MARGIN - 16}" text-anchor="end" fill="#c33">held-out (greedy)</text>'
            f'<text x="{WIDTH - MARGIN}" y="{MARGIN - 2}" text-anchor="end" fill="#9ab">training batch</text></svg>\n')


def write_curve(folder: Path, train: Sequence[float], held_out: Sequence[tuple[int, float]], title: str) -> Path:
    """`curve.csv` and `curve.svg` in `folder`; returns the SVG's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "curve.csv").write_text(curve_csv(train, held_out))
    svg = folder / "curve.svg"
    svg.write_text(curve_svg(train, held_out, title))
    return svg
