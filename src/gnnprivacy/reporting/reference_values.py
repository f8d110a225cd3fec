"""Published numbers to put beside ours: loader for ``reporting/references/*.yaml``.

Each YAML file transcribes one paper table (or a family of tables) exactly, from the engineering
spec named in its ``source`` (spec file, section, table), cell by cell as text
(``"74.2 ± 1.0"``), together with the mapping from the paper's row and column labels to our
configuration keys:

```
id: 000-table2
metric: test_accuracy          # which of our metrics the numbers are
scale: 100                     # the paper's numbers are metric * scale (percent)
blocks:
  - name: GCN column
    row_headers: ["ε", "method"]          # the paper's header cells of the label columns
    row_keys: [epsilon, method]           # what each label column means in our configs
    labels:                               # label -> config values (null: no counterpart here)
      method: {"Ours (HeterPoisson)": {method: heterpoisson, backbone: gcn}, "GAP": null}
    columns:                              # the value columns: header label -> config values
      - {label: Facebook, match: {dataset: facebook}}   # (match null + where: {dataset: ...}: no
                                                        # counterpart, but on that dataset)
    rows:
      - ["2", "Ours (HeterPoisson)", "74.2 ± 1.0"]
```

A label column without a ``labels`` entry means the cell itself is the config value
(``"2"`` -> ``epsilon: 2``). A published value *matches* one of our aggregated groups when every
key of its match dictionary equals the group's value (numbers compared as floats); the keys may
be config keys, ``method``, ``dataset`` or ``private``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gnnprivacy.errors import InvalidParameterError, UnknownNameError

_VALUE_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:±\s*(\d+(?:\.\d+)?))?")


def parse_value(text: str) -> tuple[float | None, float | None]:
    """``"74.2 ± 1.0"`` -> ``(74.2, 1.0)``; ``"68.075"`` -> ``(68.075, None)``; a truncated std -> None."""
    m = _VALUE_RE.match(str(text))
    if not m:
        return None, None
    std = m.group(2)
    if std is not None and str(text)[m.end():].lstrip().startswith((".", "?")):
        std = None  # e.g. "72.8 ± 5.?" -- the source truncates the std
    return float(m.group(1)), None if std is None else float(std)


@dataclass(frozen=True)
class ReferenceValue:
    """One published cell."""

    table: str
    block: str
    row: tuple[str, ...]
    column: str
    text: str
    mean: float | None
    std: float | None
    match: dict[str, Any] | None  #: config values it corresponds to; None: no counterpart here
    #: what the cell's labels say even without a counterpart (its dataset, ...): the non-null parts
    where: dict[str, Any] | None = None

    def matches(self, attrs: dict[str, Any]) -> bool:
        """Whether a group with attributes ``attrs`` (config + method/dataset/private) is this cell."""
        return self.match is not None and self.mean is not None and values_match(self.match, attrs)


@dataclass(frozen=True)
class ReferenceBlock:
    """One transcribed table (the paper's layout) and its cells."""

    name: str
    row_headers: tuple[str, ...]
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    values: tuple[ReferenceValue, ...]


@dataclass(frozen=True)
class ReferenceTable:
    """A reference file: source, metric, scale and blocks."""

    id: str
    title: str
    source: dict[str, str]
    metric: str
    scale: float
    statistic: str
    notes: str
    blocks: tuple[ReferenceBlock, ...]
    #: is a higher value better ("higher"), a lower one ("lower"), or neither ("none": an attack's
    #: AUC reproduced as a measurement)? None: the metric's usual direction
    better: str | None = None
    #: the trivial classifier's value: a number in the metric's unit (0.5 for an AUC) or the name
    #: of the metric of our runs that carries it; None: the metric's default (`verdicts`)
    chance: float | str | None = None
    #: datasets held here under the paper's name that are another graph -> why (their cells get
    #: the verdict "substitute data")
    substitutes: dict[str, str] = field(default_factory=dict)
    #: published cells on data held here that are not run, and why: ``{block, row, where, reason}``
    #: entries (each key optional; ``row`` lists labels the cell's row must contain, ``where``
    #: values its labels must give)
    not_run: tuple[dict[str, Any], ...] = ()

    @property
    def citation(self) -> str:
        """The paper's table, as a reader can find it (``docs/papers.md`` cites the papers);
        not the transcription's source file, which is not part of the repository."""
        return f"{self.title} (the paper: docs/papers.md)"

    def values(self) -> list[ReferenceValue]:
        return [v for b in self.blocks for v in b.values]


def values_match(match: dict[str, Any], attrs: dict[str, Any]) -> bool:
    """Every key of ``match`` is in ``attrs`` with an equal value (numbers as floats)."""
    for key, want in match.items():
        if key not in attrs:
            return False
        have = attrs[key]
        if isinstance(want, bool) or isinstance(have, bool):
            if have is not want:
                return False
        elif isinstance(want, (int, float)) and isinstance(have, (int, float)):
            if not math.isclose(float(want), float(have), rel_tol=1e-9, abs_tol=1e-12):
                return False
        elif str(want) != str(have):
            return False
    return True


def _label_match(key: str, cell: str, labels: dict[str, Any]) -> dict[str, Any] | None:
    import yaml

    if key in labels:
        if cell not in labels[key]:
            raise InvalidParameterError(f"labels.{key}", f"a mapping with an entry for {cell!r}", sorted(labels[key]))
        return labels[key][cell]
    return {key: yaml.safe_load(cell)}


def _build_block(table_id: str, raw: dict[str, Any]) -> ReferenceBlock:
    row_keys = list(raw["row_keys"])
    labels = raw.get("labels") or {}
    fixed = raw.get("fixed") or {}
    columns = raw["columns"]
    values = []
    for row in raw["rows"]:
        row = [str(c) for c in row]
        if len(row) != len(row_keys) + len(columns):
            raise InvalidParameterError(f"{table_id}/{raw['name']} row", f"{len(row_keys) + len(columns)} cells", row)
        parts = [dict(fixed)] + [_label_match(k, c, labels) for k, c in zip(row_keys, row)]
        for col, text in zip(columns, row[len(row_keys):]):
            merged: dict[str, Any] | None = {}
            where: dict[str, Any] = {}
            for part in parts + [col.get("match")]:
                merged = None if part is None or merged is None else {**merged, **part}
                where = {**where, **(part or {})}
            where.update(col.get("where") or {})  # what a column without a counterpart is about
            mean, std = parse_value(text)
            values.append(ReferenceValue(table_id, raw["name"], tuple(row[: len(row_keys)]), col["label"],
                                         text, mean, std, merged, where))
    return ReferenceBlock(raw["name"], tuple(raw.get("row_headers") or row_keys),
                          tuple(c["label"] for c in columns), tuple(tuple(str(c) for c in r) for r in raw["rows"]),
                          tuple(values))


def reference_dir() -> Path:
    """The folder holding the packaged reference YAML files."""
    return Path(str(resources.files("gnnprivacy.reporting") / "references"))


def load_reference_file(path: str | Path) -> ReferenceTable:
    """Parse one reference YAML file."""
    import yaml

    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return ReferenceTable(
        id=raw["id"], title=raw.get("title", raw["id"]), source=dict(raw.get("source") or {}),
        metric=raw.get("metric", "test_accuracy"), scale=float(raw.get("scale", 1.0)),
        statistic=raw.get("statistic", ""), notes=raw.get("notes", ""),
        blocks=tuple(_build_block(raw["id"], b) for b in raw["blocks"]), better=raw.get("better"),
        chance=raw.get("chance"), substitutes={str(k): str(v) for k, v in (raw.get("substitutes") or {}).items()},
        not_run=tuple(raw.get("not_run") or ()))


def load_references(ids: list[str] | tuple[str, ...] | None = None, *, directory: str | Path | None = None
                    ) -> list[ReferenceTable]:
    """All reference tables (or the ones named in ``ids``; unknown ids raise ``UnknownNameError``)."""
    folder = Path(directory) if directory else reference_dir()
    tables = {t.id: t for t in (load_reference_file(p) for p in sorted(folder.glob("*.yaml")))}
    if ids is None:
        return list(tables.values())
    missing = [i for i in ids if i not in tables]
    if missing:
        raise UnknownNameError("reference table", missing[0], tables)
    return [tables[i] for i in ids]
