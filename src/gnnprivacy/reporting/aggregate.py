"""Aggregation over seeds: group runs that differ only in their seeds, summarise each metric.

A *group* is the set of finished runs whose resolved configurations agree on every key except
the seeds and the locations (``seed``, ``split_seed``, ``runs_dir``, ``data_root``, ``device``).
Each metric of a group is summarised by its mean, the sample standard deviation (``ddof = 1``;
NaN for one run) and a two-sided 95% Student-t confidence interval for the mean,

    mean ± t_{0.975, n-1} · std / sqrt(n),

which assumes roughly normal run-to-run variation; with n = 3 seeds (the papers' usual count)
the interval is wide (t = 4.30), which is the honest answer for three samples. The interval is
clipped to the metric's range (``[0, 1]`` for accuracy, F1, AUC, precision, recall), so it never
claims an accuracy above 100 %; ``n`` is always shown beside it.

Repeats: runs whose configuration *and* seeds are identical (the same command run twice; only
the locations ``runs_dir``, ``data_root``, ``device`` may differ) are one sample, not several:
the newest is kept and the others are listed in `Group.repeats`. Runs with
``secure_mode`` draw their noise from the OS and are independent even with equal seeds, so they
are all kept. A metric that is missing or not finite in some run (``"nan"``) is left out of that
metric's summary, and the run is listed in `Group.nonfinite`, so ``n`` below the group's
run count is always explained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

IGNORED_KEYS = frozenset({"seed", "split_seed", "runs_dir", "data_root", "device"})
#: keys that do not change a run's result: runs equal up to these (and seeds equal) are repeats
LOCATION_KEYS = frozenset({"runs_dir", "data_root", "device", "resume"})
PROPORTION_HINTS = ("accuracy", "f1", "auc", "precision", "recall")


def metric_bounds(metric: str) -> tuple[float, float] | None:
    """The range of a metric: ``(0, 1)`` for proportions (accuracy, F1, AUC ...), else ``None``."""
    return (0.0, 1.0) if any(h in metric for h in PROPORTION_HINTS) else None


@dataclass(frozen=True)
class Summary:
    """Mean, sample std and a t confidence interval of ``n`` values."""

    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float
    confidence: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


def summarize(values: list[float], *, confidence: float = 0.95,
              bounds: tuple[float, float] | None = None) -> Summary:
    """Summarise finite ``values`` (non-finite ones are dropped); empty input gives NaNs.

    ``bounds``: the metric's range; the confidence interval is clipped to it.
    """
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, confidence)
    mean = math.fsum(xs) / n
    if n == 1:
        return Summary(1, mean, float("nan"), float("nan"), float("nan"), confidence)
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    from scipy.stats import t

    half = float(t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Summary(n, mean, std, low, high, confidence)


@dataclass
class Group:
    """Runs sharing a configuration up to seeds, with per-metric summaries."""

    attrs: dict[str, Any]
    run_ids: list[str] = field(default_factory=list)
    metrics: dict[str, Summary] = field(default_factory=dict)
    epsilon: Summary | None = None  #: privacy spent (inf for non-private runs)
    delta: float | None = None
    relation: str | None = None  #: neighbouring relation of the epsilon (add_or_remove, replace ...)
    quick: bool = False  #: some run came from a ``--quick`` (reduced) reproduction
    repeats: list[str] = field(default_factory=list)  #: run ids left out as repeats of a kept run
    nonfinite: dict[str, list[str]] = field(default_factory=dict)  #: metric -> runs where it is not finite

    @property
    def n(self) -> int:
        return len(self.run_ids)

    def get(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)


def row_attrs(row: dict[str, Any]) -> dict[str, Any]:
    """The attributes of an index row used for grouping and matching references."""
    attrs = {k[len("config."):]: v for k, v in row.items() if k.startswith("config.")}
    attrs["method"] = row.get("method")
    attrs["dataset"] = row.get("dataset")
    if "privacy.private" in row:
        attrs["private"] = bool(row["privacy.private"])
    return attrs


def _freeze(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def group_rows(rows: list[dict[str, Any]], *, confidence: float = 0.95) -> list[Group]:
    """Group finished index rows (``status == "ok"``) over seeds and summarise every metric."""
    buckets: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("status", "ok") != "ok":
            continue
        attrs = row_attrs(row)
        key = tuple(sorted((k, _freeze(v)) for k, v in attrs.items() if k not in IGNORED_KEYS))
        buckets.setdefault(key, []).append(row)
    groups = []
    for key, members in buckets.items():
        members, repeats = drop_repeats(members)
        attrs = {k: v for k, v in row_attrs(members[0]).items() if k not in IGNORED_KEYS}
        names = sorted({k[len("metrics."):] for r in members for k in r if k.startswith("metrics.")})
        nonfinite = {m: sorted(r["run_id"] for r in members if not _finite(r.get(f"metrics.{m}")))
                     for m in names}
        metrics = {m: summarize([r.get(f"metrics.{m}") for r in members], confidence=confidence,
                                bounds=metric_bounds(m)) for m in names}
        eps = [r.get("epsilon") for r in members if r.get("epsilon") is not None]
        eps_summary = (Summary(len(eps), math.inf, math.nan, math.nan, math.nan)
                       if eps and all(math.isinf(e) for e in eps) else summarize(eps, confidence=confidence))
        deltas = [r.get("delta") for r in members if r.get("delta") is not None]
        relations = sorted({str(r["privacy.relation"]) for r in members if r.get("privacy.relation")})
        groups.append(Group(attrs, sorted(r["run_id"] for r in members), metrics, eps_summary,
                            max(deltas) if deltas else None, relation="/".join(relations) or None,
                            quick=any(is_quick_row(r) for r in members), repeats=repeats,
                            nonfinite={m: ids for m, ids in nonfinite.items() if ids}))
    return sorted(groups, key=lambda g: _sort_key(g.attrs))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def drop_repeats(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """``(rows kept, run ids left out)``: of the rows with one configuration and the same seeds
    (up to `LOCATION_KEYS`), the newest is kept; ``secure_mode`` runs are all kept."""
    kept: dict[Any, dict[str, Any]] = {}
    left_out = []
    for row in sorted(rows, key=lambda r: (str(r.get("created") or ""), r["run_id"]), reverse=True):
        attrs = row_attrs(row)
        if attrs.get("secure_mode"):
            kept[("secure", row["run_id"])] = row
            continue
        identity = tuple(sorted((k, _freeze(v)) for k, v in attrs.items() if k not in LOCATION_KEYS))
        if identity in kept:
            left_out.append(row["run_id"])
        else:
            kept[identity] = row
    return sorted(kept.values(), key=lambda r: r["run_id"]), sorted(left_out)


def is_quick_row(row: dict[str, Any]) -> bool:
    """Whether an index row comes from a ``--quick`` reproduction (its sweep's name ends in ``-quick``)."""
    return str(row.get("sweep") or "").endswith("-quick")


def _sort_key(attrs: dict[str, Any]) -> tuple:
    def part(v):
        return (0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))

    ordered = ["dataset", "method"] + sorted(k for k in attrs if k not in ("dataset", "method"))
    return tuple(part(attrs.get(k)) for k in ordered)


def varying_keys(groups: list[Group]) -> list[str]:
    """The keys that distinguish groups, ``dataset`` and ``method`` first.

    ``dataset`` and ``method`` count when they take several values; any other key counts when it
    takes several values *within one method* (a hyperparameter only some methods have, constant
    for each, is implied by the method and left out; so is ``private``).
    """
    out = [k for k in ("dataset", "method") if len({repr(g.attrs.get(k)) for g in groups}) > 1]
    by_method: dict[Any, list[Group]] = {}
    for g in groups:
        by_method.setdefault(g.attrs.get("method"), []).append(g)
    keys = set().union(*(g.attrs.keys() for g in groups)) if groups else set()
    extra = {k for k in keys - {"dataset", "method", "private"}
             for members in by_method.values() if len({repr(_freeze(g.attrs.get(k))) for g in members}) > 1}
    return out + sorted(extra)


def constant_keys(groups: list[Group], keys: tuple[str, ...]) -> dict[str, Any]:
    """Those of ``keys`` that every group has, with one common value (e.g. a fixed ``eps_x``)."""
    out = {}
    for k in keys:
        values = {repr(_freeze(g.attrs.get(k))) for g in groups}
        if groups and len(values) == 1 and groups[0].attrs.get(k) is not None:
            out[k] = _freeze(groups[0].attrs[k])
    return out
