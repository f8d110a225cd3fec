"""Privacy-utility plots (matplotlib, Agg, no pyplot global state): metric vs privacy budget.

One figure per combination of the varying configuration keys other than the budget and the
method (typically one per dataset, or per dataset and ``eps_x``); in it one line per method
(and backbone) with error bars = sample std over seeds, non-private methods as a dashed
horizontal line, and the paper's published points (hollow markers, their std as error bars)
for the same configuration at every budget the paper reports. Lines that share x positions are
offset horizontally (a few percent of an octave on the log axis, symmetric around the true budget)
so that no marker hides another; the tick labels stay at the true budgets. A figure holding any
``--quick`` result says so in its title.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass

from gnnprivacy.reporting.aggregate import Group, constant_keys, varying_keys
from gnnprivacy.reporting.reference_values import ReferenceTable, values_match
from gnnprivacy.reporting.tables import COLUMN_KEYS, budget_key, fmt_value, metric_scale

MAX_PLOTS = 24
JITTER = 0.06  #: horizontal offset between neighbouring series, as a fraction of the x scale step
_LINE_KEYS = ("method", "backbone")


@dataclass(frozen=True)
class Plot:
    """A rendered figure: title, PNG bytes and a file name for the Markdown report."""

    title: str
    png: bytes
    filename: str


def _line_label(attrs: dict, keys: list[str]) -> str:
    return " ".join(fmt_value(k, attrs.get(k)) for k in keys if attrs.get(k) is not None)


def _paper_points(line_attrs: dict, x_key: str, references: list[ReferenceTable], metric: str):
    points = []
    for ref in references:
        if ref.metric != metric:
            continue
        for v in ref.values():
            if v.match is None or v.mean is None or x_key not in v.match:
                continue
            rest = {k: val for k, val in v.match.items() if k != x_key}
            if values_match(rest, line_attrs):
                points.append((float(v.match[x_key]), v.mean / ref.scale, (v.std or 0.0) / ref.scale))
    return sorted(set(points))


def privacy_utility_plots(groups: list[Group], metric: str, references: list[ReferenceTable] = ()) -> list[Plot]:
    """Figures of ``metric`` vs the privacy budget (see `budget_key`;
    none when no run has a budget)."""
    groups = [g for g in groups if metric in g.metrics and g.metrics[metric].n > 0]
    keys = varying_keys(groups)
    x_key = budget_key(groups, keys)
    if x_key is None:
        return []
    line_keys = [k for k in _LINE_KEYS if k in keys] or ["method"]
    panel_keys = [k for k in keys if k != x_key and k not in line_keys]
    panels: dict[tuple, list[Group]] = {}
    for g in groups:
        panels.setdefault(tuple(fmt_value(k, g.get(k)) for k in panel_keys), []).append(g)
    fixed = {k: v for k, v in constant_keys(groups, COLUMN_KEYS).items() if k != x_key}
    suffix = f" ({', '.join(f'{k}={v}' for k, v in fixed.items())})" if fixed else ""
    plots = []
    for panel, members in list(panels.items())[:MAX_PLOTS]:
        title = (", ".join(f"{k}={v}" for k, v in zip(panel_keys, panel)) or "all runs") + suffix
        if any(g.quick for g in members):
            title = f"QUICK (not comparable to the paper): {title}"
        png = _render_panel(members, metric, x_key, line_keys, list(references), title)
        # a key a panel's runs do not set reads "–" in the title and "none" in the file name
        slug = re.sub(r"[^A-Za-z0-9.=-]+", "_",
                      f"{metric}-vs-{x_key}-{title}".replace("=–", "=none")).strip("_")
        plots.append(Plot(title, png, f"{slug}.png"))
    return plots


def _render_panel(members: list[Group], metric: str, x_key: str, line_keys: list[str],
                  references: list[ReferenceTable], title: str) -> bytes:
    from matplotlib.figure import Figure

    scale = metric_scale(metric)
    fig = Figure(figsize=(6.4, 4.2), dpi=100)
    ax = fig.subplots()
    colors = [c["color"] for c in _color_cycle()]
    lines: dict[str, list[Group]] = {}
    for g in members:
        lines.setdefault(_line_label(g.attrs, line_keys), []).append(g)
    positive = all(float(g.get(x_key)) > 0 for g in members if g.get(x_key) is not None)
    n_series = 2 * len(lines)  # ours and the paper's, per line
    xs_all = []
    for i, (label, gs) in enumerate(sorted(lines.items())):
        color = colors[i % len(colors)]
        ours_x = _offsetter(2 * i, n_series, positive)
        paper_x = _offsetter(2 * i + 1, n_series, positive)
        private = [g for g in gs if g.get(x_key) is not None]
        flat = [g for g in gs if g.get(x_key) is None]
        if private:
            private.sort(key=lambda g: float(g.get(x_key)))
            xs = [float(g.get(x_key)) for g in private]
            xs_all += xs
            ys = [g.metrics[metric].mean * scale for g in private]
            err = [0.0 if math.isnan(g.metrics[metric].std) else g.metrics[metric].std * scale for g in private]
            ax.errorbar([ours_x(x) for x in xs], ys, yerr=err, marker="o", capsize=4, color=color, label=f"{label} (ours)")
        for g in flat:
            ax.axhline(g.metrics[metric].mean * scale, linestyle="--", color=color, label=f"{label} (non-private)")
        attrs = {k: v for k, v in gs[0].attrs.items() if k != x_key}
        pts = _paper_points(attrs, x_key, references, metric)
        if pts:
            xs_all += [p[0] for p in pts]
            ax.errorbar([paper_x(p[0]) for p in pts], [p[1] * scale for p in pts], yerr=[p[2] * scale for p in pts],
                        marker="s", markerfacecolor="none", linestyle=":", capsize=3, color=color,
                        label=f"{label} (paper)")
    budget_axis(ax, xs_all, x_key)
    ax.set_ylabel(f"{metric}{' (%)' if scale == 100 else ''}")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def budget_axis(ax, xs: list[float], x_key: str) -> None:
    """Ticks labelled at the true budgets ``xs`` (log2 axis when all are positive).

    With a single budget the limits span one octave (or one unit) each side, so the
    few-percent series offsets read as offsets, not as different budgets."""
    ax.set_xlabel(x_key)
    ticks = sorted(set(xs))
    if not ticks:
        return
    if ticks[0] > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [fmt_value(x_key, x) for x in ticks])
    ax.minorticks_off()
    if len(ticks) == 1:
        x = ticks[0]
        ax.set_xlim(*((x / 2, x * 2) if x > 0 else (x - 1, x + 1)))


def series_offset(index: int, count: int) -> float:
    """Offset of series ``index`` of ``count``, symmetric around 0, ``JITTER`` apart."""
    return (index - (count - 1) / 2) * JITTER


def _offsetter(index: int, count: int, log_axis: bool):
    """Map a true x to the plotted x of series ``index``: multiplicative on a log axis."""
    shift = series_offset(index, count)
    if log_axis:
        return lambda x: x * 2.0 ** shift
    return lambda x: x + shift


def _color_cycle():
    from matplotlib import rcParams

    return list(rcParams["axes.prop_cycle"])
