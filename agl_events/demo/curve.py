"""A learning curve as files: CSV for tools, PNG for eyes (matplotlib, from the training extra).

Two series on one 0-1 reward axis: the mean training reward of every step's batch (sampled at temperature
1) and the held-out mean reward of the greedy evaluations. The CSV is pure text; the PNG is drawn with
matplotlib's Agg backend, so no display is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: Colours of the two series, as matplotlib takes them (the test looks for them in the picture).
TRAIN_COLOUR, HELD_OUT_COLOUR = "#7f9fbf", "#cc2222"


def curve_csv(train: Sequence[float], held_out: Sequence[tuple[int, float]]) -> str:
    """`step,train_reward,held_out_reward`: one row per step (0 = before training), blanks where none."""
    evals = dict(held_out)
    rows = ["step,train_reward,held_out_reward"]
    for step in range(max([len(train), *evals]) + 1 if train or evals else 0):
        trained = f"{train[step - 1]:.4f}" if 0 < step <= len(train) else ""
        rows.append(f"{step},{trained},{f'{evals[step]:.4f}' if step in evals else ''}")
    return "\n".join(rows) + "\n"


def curve_png(path: Path, train: Sequence[float], held_out: Sequence[tuple[int, float]], title: str) -> Path:
    """Both series against the step, with a grid and a legend, 960x540 pixels."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(9.6, 5.4), dpi=100)
    try:
        # a line of one point draws nothing: a one-step run shows its batch reward as a dot
        axes.plot(range(1, len(train) + 1), train, color=TRAIN_COLOUR, linewidth=1.5, label="training batch",
                  marker="o" if len(train) == 1 else None)
        axes.plot([s for s, _ in held_out], [r for _, r in held_out], color=HELD_OUT_COLOUR, linewidth=2.5,
                  marker="o", label="held-out (greedy)")
        axes.set(title=title, xlabel="GRPO step", ylabel="mean reward", ylim=(0, 1.02))
        axes.grid(alpha=0.3)
        axes.legend(loc="lower right")
        figure.savefig(path)
    finally:
        plt.close(figure)
    return path


def write_curve(folder: Path, train: Sequence[float], held_out: Sequence[tuple[int, float]], title: str) -> Path:
    """`curve.csv` and `curve.png` in `folder`; returns the PNG's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "curve.csv").write_text(curve_csv(train, held_out))
    return curve_png(folder / "curve.png", train, held_out, title)
