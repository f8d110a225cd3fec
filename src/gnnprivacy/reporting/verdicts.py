"""Verdicts: each published cell we can run beside ours, with reproduced / beaten / not reproduced.

A published cell (`gnnprivacy.reporting.reference_values.ReferenceValue`) is compared with
every aggregated group of our runs whose configuration it matches. With ``d = ours - paper``
in the paper's unit (percent) and ``tol = max(2, the paper's std)`` ("within the paper's
spread or 2 points"):

- ``reproduced`` when ``|d| <= tol``;
- ``beaten`` when ``d > tol`` and higher is better for the table's metric (``d < -tol`` when
  lower is better); tables whose metric has no better direction (an attack's AUC reproduced as
  a measurement) are never "beaten";
- ``not reproduced`` otherwise, with the `Reason` (``reporting/reasons.yaml``) that explains
  it: a section with the measured cause and the commands that show it.

A cell without a known reason gets ``within-seed-spread`` when the paper's value lies inside
the 95% t-interval of our mean (the seeds cannot tell the two apart), else the fallback
``unexplained``; the commands of both rerun the cells. The reproduction test requires that no
committed full report has an unexplained cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gnnprivacy.reporting.aggregate import Group, Summary
from gnnprivacy.reporting.reference_values import ReferenceTable, values_match

VERDICTS = ("reproduced", "beaten", "not reproduced")
TOLERANCE_POINTS = 2.0
#: per reference table: is a higher value of its metric better? (None: no direction)
_BETTER_DEFAULT = {"test_accuracy": "higher"}


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
    "For these cells the difference exceeds max(2 points, the paper's std), but the paper's value "
    "lies inside the 95% t-interval of our mean over seeds: the seeds we ran cannot tell the two "
    "apart, and more seeds would narrow the interval. The commands rerun each cell (add seeds in "
    "the reproduction's config, `seeds:`).", (), ())

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


def judge(diff: float, tolerance: float, better: str | None) -> str:
    """The verdict for ``diff = ours - paper`` (see the module docstring)."""
    if abs(diff) <= tolerance:
        return "reproduced"
    if (better == "higher" and diff > 0) or (better == "lower" and diff < 0):
        return "beaten"
    return "not reproduced"


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
            for g in groups:
                summary = g.metrics.get(ref.metric)
                if summary is None or summary.n == 0 or not value.matches(g.attrs):
                    continue
                cell = Cell(ref.id, value.block, value.row, value.column, value.text, value.mean, value.std,
                            summary, ref.scale, dict(g.attrs), better)
                cell.verdict = judge(cell.diff, cell.tolerance, better)
                if cell.verdict == "not reproduced":
                    cell.reason = next((r for r in reasons if r.covers(ref.id, g.attrs)), None)
                    if cell.reason is None:
                        inside = (not math.isnan(summary.ci_low)
                                  and summary.ci_low * ref.scale <= value.mean <= summary.ci_high * ref.scale)
                        cell.reason = WITHIN_SPREAD if inside else UNEXPLAINED
                cells.append(cell)
    return cells


def runnable_cells(references: list[ReferenceTable], datasets: set[str]) -> dict[str, int]:
    """Per paper, the published cells that have a counterpart here and whose dataset we hold."""
    out: dict[str, int] = {}
    for ref in references:
        for v in ref.values():
            if v.match is not None and v.mean is not None and v.match.get("dataset") in datasets:
                out[paper_of(ref.id)] = out.get(paper_of(ref.id), 0) + 1
    return out


def count_verdicts(cells: list[Cell]) -> dict[str, dict[str, int]]:
    """``{paper: {verdict: count}}`` in `VERDICTS` order."""
    out: dict[str, dict[str, int]] = {}
    for c in cells:
        out.setdefault(c.paper, {v: 0 for v in VERDICTS})[c.verdict] += 1
    return dict(sorted(out.items()))
