"""Verdicts: each published cell we can run beside ours, with reproduced / beaten / not reproduced.

A published cell (`gnnprivacy.reporting.reference_values.ReferenceValue`) is compared with
every aggregated group of our runs whose configuration it matches. With ``d = ours - paper``
in the paper's unit (percent) and ``tol = max(2, the paper's std)`` ("within the paper's
spread or 2 points"):

- ``substitute data`` when the cell's dataset here is another graph under the paper's name
  (the reference table's ``substitutes``, e.g. 004's German): not counted as reproduced, whatever
  the numbers;
- ``trivial classifier`` when both the paper's value and ours lie within ``tol`` of the trivial
  classifier's (`trivial_level`: the majority-class rate of our test split, which every node
  classification record carries as ``test_majority_rate``, or the reference table's fixed
  ``chance``, 50 for an AUC): agreeing there shows nothing was learnt, so it is not counted as
  reproduced;
- ``reproduced`` when ``|d| <= tol``;
- ``beaten`` when higher is better for the table's metric and the *whole* 95% t-interval of our
  mean clears the tolerance above the paper (``ci_low - paper > tol``; mirrored when lower is
  better); tables whose metric has no better direction (an attack's AUC reproduced as a
  measurement) are never "beaten";
- ``not reproduced`` otherwise, with the `Reason` (``reporting/reasons.yaml``) that explains
  it: a section with the measured cause and the commands that show it.

The rule is symmetric: a cell whose interval still reaches the tolerance band around the
paper's value (``[paper - tol, paper + tol]``), on either side, is ``not reproduced`` with the
reason ``within-seed-spread`` (the seeds cannot tell the two apart) unless a measured reason
covers it; a cell whose interval lies wholly on the worse side gets its measured reason or the
fallback ``unexplained``. The commands of both rerun the cells. The reproduction test requires
that no committed full report has an unexplained cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gnnprivacy.reporting.aggregate import Group, Summary
from gnnprivacy.reporting.reference_values import ReferenceTable, values_match

VERDICTS = ("reproduced", "beaten", "not reproduced", "substitute data", "trivial classifier")
SUBSTITUTE, TRIVIAL = "substitute data", "trivial classifier"
TOLERANCE_POINTS = 2.0
#: per reference table: is a higher value of its metric better? (None: no direction)
_BETTER_DEFAULT = {"test_accuracy": "higher"}
#: per metric: the metric of our runs giving the trivial classifier's value on the same split
_CHANCE_DEFAULT = {"test_accuracy": "test_majority_rate"}


@dataclass(frozen=True)
class Reason:
    """Why some published cells are not reproduced: a measured cause and the commands that show it."""

    id: str
    title: str
    text: str
    commands: tuple[str, ...]
    applies: tuple[dict[str, Any], ...]  #: match dictionaries over ``table`` and the cell's attributes

    def covers(self, table: str, attrs: dict[str, Any]) -> bool:
        return any(values_match(m, {"table": table, **attrs}) for m in self.applies)


WITHIN_SPREAD = Reason(
    "within-seed-spread", "Outside the tolerance, inside our seeds' spread",
    "For these cells the difference exceeds max(2 points, the paper's std), on either side, but "
    "the 95% t-interval of our mean over seeds still reaches the band of that tolerance around "
    "the paper's value: the seeds we ran cannot tell the two apart, and more seeds would narrow "
    "the interval. The commands rerun each cell (add seeds in the reproduction's config, "
    "`seeds:`).", (), ())

UNEXPLAINED = Reason(
    "unexplained", "Not reproduced, cause not yet measured",
    "These cells differ from the paper by more than its spread and 2 points, and no measured "
    "cause is recorded for them yet. The commands rerun each such cell alone.", (), ())


@dataclass
class Cell:
    """One published cell beside one of our aggregated configurations."""

    table: str
    block: str
    row: tuple[str, ...]
    column: str
    paper_text: str
    paper_mean: float
    paper_std: float | None
    ours: Summary
    scale: float
    attrs: dict[str, Any]
    better: str | None
    verdict: str = ""
    reason: Reason | None = None
    commands: list[str] = field(default_factory=list)
    trivial: float | None = None  #: the trivial classifier's value on our split (paper units)
    substitute: str | None = None  #: why the dataset here is a substitute for the paper's
    defaults: Summary | None = None  #: ours at this library's defaults, beside a paper-config baseline

    @property
    def paper(self) -> str:
        return paper_of(self.table)

    @property
    def ours_mean(self) -> float:
        return self.ours.mean * self.scale

    @property
    def diff(self) -> float:
        return self.ours_mean - self.paper_mean

    @property
    def tolerance(self) -> float:
        return max(TOLERANCE_POINTS, self.paper_std or 0.0)

    @property
    def ci_half(self) -> float:
        return math.nan if math.isnan(self.ours.ci_low) else self.ours.half_width * self.scale


def paper_of(table_id: str) -> str:
    """The paper id of a reference table: ``"000"`` for ``000-table2``."""
    return table_id.split("-", 1)[0]


def judge(diff: float, tolerance: float, better: str | None, ci_half: float = 0.0) -> str:
    """The verdict for ``diff = ours - paper`` with our 95% interval ``diff ± ci_half`` (see the
    module docstring; a NaN ``ci_half``, one run, counts as a point)."""
    if abs(diff) <= tolerance:
        return "reproduced"
    half = 0.0 if math.isnan(ci_half) else abs(ci_half)
    if (better == "higher" and diff - half > tolerance) or (better == "lower" and diff + half < -tolerance):
        return "beaten"
    return "not reproduced"


def within_spread(diff: float, tolerance: float, ci_half: float) -> bool:
    """Whether our interval ``diff ± ci_half`` reaches the band ``[-tolerance, tolerance]``."""
    return not math.isnan(ci_half) and abs(diff) - abs(ci_half) <= tolerance


def at_trivial(paper: float, ours: float, trivial: float | None, tolerance: float) -> bool:
    """Whether the paper's value and ours both lie within ``tolerance`` of the trivial classifier's."""
    return trivial is not None and abs(paper - trivial) <= tolerance and abs(ours - trivial) <= tolerance


def trivial_level(ref: ReferenceTable, group: Group) -> float | None:
    """The trivial classifier's value for ``group`` in the table's unit: the reference's fixed
    ``chance`` (a number), or the group's mean of the metric it names (default for accuracy:
    ``test_majority_rate``); None when the records do not carry it."""
    chance = ref.chance if ref.chance is not None else _CHANCE_DEFAULT.get(ref.metric)
    if chance is None:
        return None
    if isinstance(chance, (int, float)):
        return float(chance) * ref.scale
    summary = group.metrics.get(str(chance))
    if summary is None or summary.n == 0 or math.isnan(summary.mean):
        return None
    return summary.mean * ref.scale


def better_direction(ref: ReferenceTable) -> str | None:
    if ref.better == "none":
        return None
    return ref.better or _BETTER_DEFAULT.get(ref.metric)


def load_reasons(path: str | Path | None = None) -> list[Reason]:
    """The packaged reasons (``reporting/reasons.yaml``)."""
    import yaml

    path = Path(path) if path else Path(str(resources.files("gnnprivacy.reporting") / "reasons.yaml"))
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    return [Reason(str(r["id"]), str(r["title"]), str(r["text"]).strip(), tuple(r.get("commands") or ()),
                   tuple(r.get("applies") or ())) for r in raw]


def compare(groups: list[Group], references: list[ReferenceTable], *,
            reasons: list[Reason] | None = None) -> list[Cell]:
    """Every (published cell, matching group) pair, judged; in the reference tables' order."""
    reasons = load_reasons() if reasons is None else reasons
    cells = []
    for ref in references:
        better = better_direction(ref)
        for value in ref.values():
            if value.match is None or value.mean is None:
                continue
            metric, match = cell_metric(ref, value.match)
            for g in groups:
                summary = g.metrics.get(metric)
                if summary is None or summary.n == 0 or not values_match(match, g.attrs):
                    continue
                cell = Cell(ref.id, value.block, value.row, value.column, value.text, value.mean, value.std,
                            summary, ref.scale, dict(g.attrs), better,
                            trivial=trivial_level(ref, g) if metric == ref.metric else None,
                            substitute=ref.substitutes.get(str(g.get("dataset"))),
                            defaults=_defaults_of(match, groups, metric))
                if cell.substitute is not None:
                    cell.verdict = SUBSTITUTE
                elif at_trivial(cell.paper_mean, cell.ours_mean, cell.trivial, cell.tolerance):
                    cell.verdict = TRIVIAL
                else:
                    cell.verdict = judge(cell.diff, cell.tolerance, better, cell.ci_half)
                if cell.verdict == "not reproduced":
                    scope = {**g.attrs, METRIC_KEY: metric}  # a reason may name the metric it explains
                    cell.reason = next((r for r in reasons if r.covers(ref.id, scope)), None)
                    if cell.reason is None:
                        cell.reason = (WITHIN_SPREAD if within_spread(cell.diff, cell.tolerance, cell.ci_half)
                                       else UNEXPLAINED)
                cells.append(cell)
    return cells


#: a match key naming the metric of our runs a row is compared with (default: the table's)
METRIC_KEY = "report_metric"


def cell_metric(ref: ReferenceTable, match: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The metric a published cell is compared with and its match without `METRIC_KEY` (a
    table whose rows are several metrics of one run, e.g. 003's AUC, accuracy, precision)."""
    if METRIC_KEY not in match:
        return ref.metric, match
    return str(match[METRIC_KEY]), {k: v for k, v in match.items() if k != METRIC_KEY}


#: the configuration key that marks a baseline run at its paper's own setting
PAPER_PRESET = ("preset", "paper")


def _defaults_of(match: dict[str, Any] | None, groups: list[Group], metric: str) -> Summary | None:
    """For a cell matched at the paper's own configuration (``preset: paper``), our run of the
    same method, dataset and budget at this library's defaults (any other preset): its summary."""
    key, paper = PAPER_PRESET
    if not match or match.get(key) != paper:
        return None
    rest = {k: v for k, v in match.items() if k != key}
    for g in groups:
        if g.get(key, "auto") != paper and values_match(rest, g.attrs) and metric in g.metrics:
            return g.metrics[metric]
    return None


def count_verdicts(cells: list[Cell]) -> dict[str, dict[str, int]]:
    """``{paper: {verdict: count}}`` in `VERDICTS` order."""
    out: dict[str, dict[str, int]] = {}
    for c in cells:
        out.setdefault(c.paper, {v: 0 for v in VERDICTS})[c.verdict] += 1
    return dict(sorted(out.items()))
