"""Learning curves of several runs compared at equal env steps (the levers table of issue 48).

``learning_curve.py`` reports are cut at the env steps of the shortest run, so a run that got more
steps from a quieter machine gains nothing. For each metric the table gives the mean of the logging
points in the third and in the last quarter of those steps (the curves are noisy: one point is one
logging window of 16 envs), and ``--plot`` draws the curves, truncated and smoothed, side by side::

    python scripts/compare_curves.py docs/benchmarks/learning/go2_velocity_rough_sac_heading.json \\
        docs/benchmarks/learning/go2_velocity_rough_sac_mirror.json \\
        --metric terrain/mean_level --metric velocity/lin_vel_error_mps --out compare.json --plot compare.png
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from unilab_gpu.utils.files import (
    OutputPathError,
    check_output,
    non_regular_kind,
    portable_paths,
    write_atomic,
    write_error,
    write_json_atomic,
)

QUARTERS = {"third quarter": (0.5, 0.75), "last quarter": (0.75, 1.0)}


def fail(message: str) -> SystemExit:
    print(f"compare_curves: {message}", file=sys.stderr)
    return SystemExit(2)


def read_report(path: Path) -> dict:
    """The finished learning-curve report at ``path`` with a checked ``curve``, or one line saying why not.

    The curve's ``env_steps`` must be finite, non-negative and strictly increasing, and every value
    a finite number: a quarter mean over a NaN, or over points out of order, would be a number
    that means nothing.
    """
    kind = non_regular_kind(path)
    if kind is not None and not path.is_symlink():  # a FIFO would block the read forever
        raise fail(f"{path} is {kind}; give a learning_curve.py report file")
    try:
        report = json.loads(path.read_text())
        curve = report.get("curve")
    except FileNotFoundError:
        raise fail(f"{path} not found") from None
    except (OSError, ValueError, AttributeError, RecursionError):
        raise fail(f"{path} is not a learning_curve.py report (JSON with a 'curve')") from None
    if report.get("complete") is False:
        raise fail(f"{path} is an unfinished report (stopped during {report.get('stage')}); compare finished runs")
    if not isinstance(curve, list) or not curve:
        raise fail(f"{path} has no logging points in its 'curve'")
    previous = -1.0
    for index, point in enumerate(curve):
        steps = point.get("env_steps") if isinstance(point, dict) else None
        if not _finite(steps) or steps < 0 or steps <= previous:
            raise fail(
                f"{path}: curve[{index}] env_steps is {steps!r}; expected a finite number above the previous "
                f"point's ({previous:g}), the steps in increasing order"
            )
        bad = next((key for key, value in point.items() if not _finite(value)), None)
        if bad is not None:
            raise fail(f"{path}: curve[{index}] {bad!r} is {point[bad]!r}; expected a finite number")
        previous = steps
    return report


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _base_task(task: object) -> object:
    return task.removesuffix("_sim2real") if isinstance(task, str) else task


def read_curves(paths: list[Path]) -> dict[Path, list[dict]]:
    """Each report's logging points (:func:`read_report`); the reports must be runs of one task."""
    reports = {path: read_report(path) for path in paths}
    # A *_sim2real task is its base task with training randomizations: the same metrics, comparable.
    tasks = {path: _base_task(report.get("task")) for path, report in reports.items()}
    if len(set(tasks.values())) > 1:
        first, *_ = paths
        other = next(path for path in paths if tasks[path] != tasks[first])
        raise fail(f"{other} is a run of task {tasks[other]!r}, {first} of {tasks[first]!r}; compare runs of one task")
    return {path: report["curve"] for path, report in reports.items()}


def run_names(paths: list[Path]) -> dict[Path, str]:
    """The name of each report in the table: its file stem, or its path where two reports share a stem."""
    stems = [path.stem for path in paths]
    return {path: path.stem if stems.count(path.stem) == 1 else str(path) for path in paths}


def equal_steps(curves: list[list[dict]]) -> int:
    """The env steps every run reached: the last logging point of the shortest run."""
    return min(curve[-1]["env_steps"] for curve in curves)


def quarter_means(curve: list[dict], env_steps: int, metric: str) -> dict[str, float | None]:
    """Mean of ``metric`` over the points in each of ``QUARTERS`` of ``env_steps``.

    A quarter ``(a, b)`` holds the points with ``a * env_steps < steps <= b * env_steps``; points
    that do not log ``metric`` (e.g. no episode ended in that window) are left out, and a quarter
    without any is ``None``.
    """
    means: dict[str, float | None] = {}
    for name, (low, high) in QUARTERS.items():
        values = [
            point[metric]
            for point in curve
            if metric in point and low * env_steps < point["env_steps"] <= high * env_steps
        ]
        means[name] = sum(values) / len(values) if values else None
    return means


def compare(curves: dict[Path, list[dict]], metrics: list[str]) -> dict:
    """Every run's quarter means of every metric, at the env steps all runs reached.

    Args:
        curves: each report's path and its logging points (:func:`read_curves`).
    """
    env_steps = equal_steps(list(curves.values()))
    names = run_names(list(curves))
    runs = {}
    for path, curve in curves.items():
        missing = [metric for metric in metrics if not any(metric in point for point in curve)]
        if missing:
            raise fail(f"{path} logs no {missing[0]!r} (its curve has {sorted(set().union(*curve))})")
        runs[names[path]] = {metric: quarter_means(curve, env_steps, metric) for metric in metrics}
    reports = [str(path) for path in curves]
    return {"benchmark": "curve_comparison", "reports": reports, "env_steps": env_steps, "runs": runs}


def plot(curves: dict[Path, list[dict]], metrics: list[str], env_steps: int, out: Path, smooth: int) -> None:
    """One panel per metric: each run's curve up to ``env_steps``, a moving mean of ``smooth`` points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 3.6), squeeze=False)
    names = run_names(list(curves))
    for path, whole in curves.items():
        curve = [point for point in whole if point["env_steps"] <= env_steps]
        for axis, metric in zip(axes[0], metrics, strict=True):
            points = [(point["env_steps"], point[metric]) for point in curve if metric in point]
            steps = [step for step, _ in points][smooth - 1 :]
            values = [value for _, value in points]
            mean = [sum(values[i - smooth + 1 : i + 1]) / smooth for i in range(smooth - 1, len(values))]
            axis.plot(steps, mean, label=names[path], linewidth=1.2)
    for axis, metric in zip(axes[0], metrics, strict=True):
        axis.set_title(f"{metric} (mean of {smooth} points)")
        axis.set_xlabel("env steps")
        axis.legend(fontsize=7)
    figure.tight_layout()
    write_atomic(out, lambda file: figure.savefig(file, format="png", dpi=110))
    plt.close(figure)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="learning_curve.py JSON reports (first: the baseline)")
    parser.add_argument("--metric", action="append", required=True, help="a curve key (repeatable)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table as JSON")
    parser.add_argument("--plot", type=Path, default=None, help="also draw the curves to this PNG")
    parser.add_argument("--force", action="store_true", help="replace existing --out / --plot files")
    parser.add_argument("--smooth", type=int, default=25, help="logging points per moving mean in --plot")
    args = parser.parse_args(argv)
    if args.smooth < 1:
        raise fail(f"--smooth must be >= 1, got {args.smooth}")
    if args.out is not None and args.plot is not None and args.out.resolve() == args.plot.resolve():
        raise fail(f"--plot: {args.plot} is also --out; give the plot its own file")
    for option, output, example in (("--out", args.out, "compare.json"), ("--plot", args.plot, "compare.png")):
        if output is not None:
            try:
                check_output(output, option, force=args.force, inputs=args.reports, example=example)
            except OutputPathError as error:
                raise fail(str(error)) from None
    curves = read_curves(args.reports)
    table = compare(curves, args.metric)
    print(f"at {table['env_steps']:,} env steps (mean over the third quarter / the last quarter)")
    for name, metrics in table["runs"].items():
        cells = [f"{metric} {' / '.join(_number(v) for v in means.values())}" for metric, means in metrics.items()]
        print(f"  {name}: {', '.join(cells)}")
    try:
        if args.out is not None:
            write_json_atomic(args.out, portable_paths(table))
        if args.plot is not None:
            plot(curves, args.metric, table["env_steps"], args.plot, args.smooth)
    except (OSError, OutputPathError) as error:
        raise fail(write_error(error)) from None
    return table


if __name__ == "__main__":
    main()
