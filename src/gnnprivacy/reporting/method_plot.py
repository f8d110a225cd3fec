"""One figure that compares every method: a metric against the privacy budget.

Each private method is one line over the budgets it ran at (mean over seeds, error bars the
sample std); a method run with several settings (the demo's two DP-MLPs) gets one line per
setting, labelled by the settings that tell its lines apart. Each non-private run is a dashed
horizontal line at its accuracy: it spends no budget, so it is a ceiling, not a point. Lines
are offset a few percent of an octave so that markers at one budget do not hide each other
(the ticks stay at the true budgets), and the y axis of a proportion stops at 100 %.
"""

from __future__ import annotations

import io
import math
import re

from gnnprivacy.reporting.aggregate import Group, _freeze
from gnnprivacy.reporting.plots import Plot, _color_cycle, _offsetter, budget_axis
from gnnprivacy.reporting.tables import COLUMN_KEYS, fmt_value, metric_scale

__all__ = ["methods_plot"]

#: configuration keys that never tell two lines of one method apart
_NOT_SETTINGS = frozenset({"method", "dataset", "private", "dataset_args", "split", "train_frac",
                           "val_frac", "test_frac"}) | frozenset(COLUMN_KEYS)


def _settings(groups: list[Group]) -> dict[str, list[str]]:
    """Per method, the configuration keys whose value differs between its groups."""
    by_method: dict[str, list[Group]] = {}
    for g in groups:
        by_method.setdefault(str(g.get("method")), []).append(g)
    out = {}
    for method, members in by_method.items():
        keys = set().union(*(g.attrs.keys() for g in members)) - _NOT_SETTINGS
        out[method] = sorted(k for k in keys
                             if len({repr(_freeze(g.get(k))) for g in members}) > 1)
    return out


def _label(g: Group, keys: list[str]) -> str:
    method = str(g.get("method"))
    if not keys:
        return method
    return f"{method} ({', '.join(f'{k}={fmt_value(k, g.get(k))}' for k in keys)})"


def methods_plot(groups: list[Group], metric: str, *, budget: str = "epsilon",
                 title: str | None = None) -> Plot | None:
    """Every method on one figure of ``metric`` against ``budget``.

    Args:
        groups: aggregated runs (`gnnprivacy.reporting.group_rows`); private groups have
            ``budget`` in their configuration, non-private ones do not.
        metric: e.g. ``"test_accuracy"`` (shown in percent).
        budget: the configuration key on the x axis (the target epsilon).
        title: figure title (default: ``"<metric> vs <budget>, <dataset>"``).

    Returns:
        The rendered `Plot`, or ``None`` when no group has the metric.
    """
    from matplotlib.figure import Figure

    groups = [g for g in groups if metric in g.metrics and g.metrics[metric].n > 0]
    if not groups:
        return None
    settings = _settings(groups)
    lines: dict[str, list[Group]] = {}
    for g in groups:
        lines.setdefault(_label(g, settings[str(g.get("method"))]), []).append(g)
    private = {k: v for k, v in lines.items() if any(g.get(budget) is not None for g in v)}
    flat = {k: v for k, v in lines.items() if k not in private}
    scale = metric_scale(metric)
    fig = Figure(figsize=(7.2, 5.0), dpi=110)
    ax = fig.subplots()
    colors = [c["color"] for c in _color_cycle()]
    xs_all: list[float] = []
    ys_all: list[float] = []
    for i, (label, members) in enumerate(sorted(private.items())):
        members = sorted((g for g in members if g.get(budget) is not None),
                         key=lambda g: float(g.get(budget)))
        shift = _offsetter(i, len(private), True)
        xs = [float(g.get(budget)) for g in members]
        ys = [g.metrics[metric].mean * scale for g in members]
        err = [0.0 if math.isnan(g.metrics[metric].std) else g.metrics[metric].std * scale
               for g in members]
        ax.errorbar([shift(x) for x in xs], ys, yerr=err, marker="o", capsize=3,
                    color=colors[i % len(colors)], label=label)
        xs_all += xs
        ys_all += ys
    for j, (label, members) in enumerate(sorted(flat.items())):
        y = sum(g.metrics[metric].mean for g in members) / len(members) * scale
        ax.axhline(y, linestyle="--", linewidth=1.5, color=colors[(len(private) + j) % len(colors)],
                   label=f"{label} (non-private)")
        ys_all.append(y)
    budget_axis(ax, xs_all, budget)
    if scale == 100.0 and ys_all:
        ax.set_ylim(max(0.0, min(ys_all) - 8.0), min(101.0, max(ys_all) + 5.0))
    ax.set_ylabel(f"{metric}{' (%)' if scale == 100.0 else ''}")
    ax.set_xlabel(f"{budget} (target)")
    datasets = sorted({str(g.get("dataset")) for g in groups})
    title = title or f"{metric} vs {budget}, {', '.join(datasets)}"
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    slug = re.sub(r"[^A-Za-z0-9.=-]+", "_", f"{metric}-vs-{budget}-all-methods").strip("_")
    return Plot(title, buf.getvalue(), f"{slug}.png")
