"""Report tables: our results laid out like the papers' tables, with published numbers beside ours.

Three kinds of tables, all as a neutral `Table` (header + text cells) rendered to Markdown
(`to_markdown`) or HTML (`to_html`):

- `results_tables`: rows = the configuration keys that vary (dataset, method, ...), columns
  = the privacy budget that varies (``epsilon``, else ``eps_y``, else ``eps_x``; non-private
  methods in a column ``∞``); a cell is ``mean ± std (n)`` of the metric in percent, with the 95%
  t-interval, and ``paper: ...`` when a published value matches the cell's configuration.
- `comparison_tables`: each published table in the paper's own layout (its row labels and
  columns), restricted to the rows we ran, each cell ``paper X ± s | ours Y ± t``.
- `privacy_table`: epsilon spent and delta per group, from the run records.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

from gnnprivacy.reporting.aggregate import Group, Summary, constant_keys, varying_keys
from gnnprivacy.reporting.reference_values import ReferenceTable, ReferenceValue

COLUMN_KEYS = ("epsilon", "eps_y", "eps_x", "eps_f", "eps_e")
#: budgets of mechanisms that protect different parts (features, edges): never one axis
_PART_KEYS = ("eps_f", "eps_e")
QUICK_BADGE = "[QUICK — reduced run, not comparable to the paper]"
QUICK_NOTE = ("QUICK: these runs come from a `--quick` reproduction (fewer seeds, steps and budgets); "
              "they check that the pipeline works and are not comparable to the published numbers")
_PERCENT_HINTS = ("accuracy", "f1", "auc", "precision", "recall")


@dataclass
class Table:
    """A rendered-agnostic table: a title, header cells, rows of text cells and a caption."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""


def metric_scale(metric: str) -> float:
    """100 for proportion metrics shown in percent (accuracy, F1, AUC ...), else 1."""
    return 100.0 if any(h in metric for h in _PERCENT_HINTS) else 1.0


def fmt_number(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}f}"


def fmt_summary(s: Summary, scale: float, *, ci: bool = True) -> str:
    """``"73.1 ± 0.8 (n=3) [71.2, 75.0]"`` (std and CI omitted when undefined)."""
    if s.n == 0:
        return "–"
    text = fmt_number(s.mean * scale)
    if not math.isnan(s.std):
        text += f" ± {fmt_number(s.std * scale)}"
    text += f" (n={s.n})"
    if ci and not math.isnan(s.ci_low):
        text += f" [{fmt_number(s.ci_low * scale)}, {fmt_number(s.ci_high * scale)}]"
    return text


def fmt_value(key: str, value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return "–" if value is None else str(value)


def matching_references(group: Group, references: list[ReferenceTable], metric: str) -> list[ReferenceValue]:
    """Published values (for ``metric``) whose configuration matches ``group``."""
    return [v for t in references if t.metric == metric for v in t.values() if v.matches(group.attrs)]


def budget_partitions(groups: list[Group]) -> list[list[Group]]:
    """``groups`` split by the part-budgets they carry (``eps_f`` for feature mechanisms,
    ``eps_e`` for edge mechanisms, both for HeteroRR), so that each part gets its own tables
    and plots with its own budget axis; groups carrying none of them (non-private baselines
    included) join every part. One part, unchanged, when at most one kind is present."""
    kinds: dict[tuple, list[Group]] = {}
    for g in groups:
        kinds.setdefault(tuple(k for k in _PART_KEYS if g.get(k) is not None), []).append(g)
    parts = [members for kind, members in kinds.items() if kind]
    if len(parts) <= 1:
        return [groups]
    rest = kinds.get((), [])
    return [members + rest for members in parts]


def budget_key(groups: list[Group], keys: list[str]) -> str | None:
    """The privacy budget to lay out along columns / the x axis: the first of ``COLUMN_KEYS``
    that varies, else the first that any group has (a single budget), else ``None``."""
    found = next((k for k in COLUMN_KEYS if k in keys), None)
    return found or next((k for k in COLUMN_KEYS if any(g.get(k) is not None for g in groups)), None)


def results_tables(groups: list[Group], metric: str, references: list[ReferenceTable] = ()) -> list[Table]:
    """Our results (one table), rows = varying keys, columns = the varying privacy budget."""
    groups = [g for g in groups if metric in g.metrics]
    if not groups:
        return []
    scale = metric_scale(metric)
    keys = varying_keys(groups)
    col_key = budget_key(groups, keys)
    row_keys = [k for k in keys if k != col_key] or ["method"]
    col_values = sorted({_col_value(g, col_key) for g in groups}, key=_col_sort) if col_key else ["all"]
    cells: dict[tuple, dict[str, list[str]]] = {}
    with_relation = col_key == "epsilon" and any(g.relation for g in groups)
    for g in groups:
        row = tuple(fmt_value(k, g.get(k)) for k in row_keys)
        if with_relation:  # epsilon under add/remove and under replace-one are not equals
            row += (g.relation or ("–" if not g.get("private", True) else "not recorded"),)
        text = fmt_summary(g.metrics[metric], scale)
        refs = matching_references(g, list(references), metric)
        if refs:
            text += " · paper " + "; ".join(r.text for r in refs)
        cells.setdefault(row, {}).setdefault(_col_value(g, col_key) if col_key else "all", []).append(text)
    header = row_keys + (["relation"] if with_relation else []) + (
        [f"{col_key} = {c}" for c in col_values] if col_key else [metric])
    rows = [list(r) + ["<br>".join(cells[r].get(c, ["–"])) for c in col_values] for r in cells]
    unit = " (%)" if scale == 100 else ""
    fixed = constant_keys(groups, COLUMN_KEYS)
    fixed.pop(col_key, None)
    caption = ("mean ± sample std (n runs) [95% t-interval, clipped to the metric's range] over seeds"
               + ("; 'paper' = the published value for the same configuration" if references else "")
               + "".join(f"; {k} = {v} in every run" for k, v in fixed.items()))
    return [mark_quick(Table(f"{metric}{unit}", header, rows, caption), groups)]


def mark_quick(table: Table, groups: list[Group]) -> Table:
    """Badge the title and caption of a table holding any ``--quick`` result."""
    if any(g.quick for g in groups):
        table.title = f"{QUICK_BADGE} {table.title}"
        table.caption = f"{QUICK_NOTE}. {table.caption}".strip()
    return table


def _col_value(g: Group, key: str | None) -> str:
    if key is None:
        return "all"
    value = g.get(key)
    if value is None:
        if not g.get("private", True):
            return "∞ (non-private)"
        spent = g.epsilon.mean if g.epsilon is not None else math.nan
        if key == "epsilon" and math.isfinite(spent):
            # a private method without an `epsilon` option (rgnn: eps_x, eps_y): the budget it
            # spent, to two significant digits, so it stands beside the targets it matches
            return fmt_value(key, float(f"{spent:.2g}"))
        return "∞ (non-private)" if key == "epsilon" else "–"
    return fmt_value(key, value)


def _col_sort(v: str):
    try:
        return (0, float(v), v)
    except ValueError:
        return (1, 0.0, v)


def comparison_tables(groups: list[Group], references: list[ReferenceTable]) -> list[Table]:
    """Each published block in the paper's layout, restricted to rows with at least one match."""
    out = []
    for ref in references:
        scale = ref.scale  # show ours in the paper's unit
        ours = [g for g in groups if ref.metric in g.metrics]
        for block in ref.blocks:
            by_cell = {(v.row, v.column): v for v in block.values}
            rows = []
            for row in block.rows:
                labels = tuple(row[: len(block.row_headers)])
                cells, hit = [], False
                for col in block.columns:
                    value = by_cell[(labels, col)]
                    found = [g for g in ours if value.matches(g.attrs)]
                    hit |= bool(found)
                    text = f"paper {value.text}"
                    for g in found:
                        text += f" | ours {fmt_summary(g.metrics[ref.metric], scale, ci=False)}"
                    cells.append(text)
                if hit:
                    rows.append(list(labels) + cells)
            if rows:
                out.append(mark_quick(Table(f"{ref.title} — {block.name}", list(block.row_headers) + list(block.columns),
                                            rows, f"Source: {ref.citation}; {ref.statistic}. {ref.notes}".strip()),
                                      ours))
    return out


def privacy_table(groups: list[Group]) -> Table:
    """Epsilon spent (mean over runs, from the accountant) and delta, per group."""
    keys = varying_keys(groups) or ["dataset", "method"]
    rows = []
    for g in groups:
        eps = g.epsilon
        eps_text = "∞ (not private)" if eps is not None and math.isinf(eps.mean) else (
            fmt_number(eps.mean, 4) if eps is not None else "–")
        delta = "–" if g.delta is None else f"{g.delta:.3g}"
        relation = g.relation or ("–" if eps is None or math.isinf(eps.mean) else "not recorded")
        rows.append([fmt_value(k, g.get(k)) for k in keys] + [eps_text, relation, delta, str(g.n)])
    return mark_quick(Table("privacy spent", keys + ["epsilon spent (mean)", "relation", "delta", "runs"], rows,
                            "epsilon reported by each run's accountant over the steps it executed; relation = "
                            "the neighbouring relation it is stated for (add_or_remove vs replace: epsilons "
                            "under different relations are not directly comparable)"), groups)


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown pipe table with a bold title and an italic caption."""
    lines = [f"**{table.title}**", "", "| " + " | ".join(_md_cell(h) for h in table.header) + " |",
             "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    if table.caption:
        lines += ["", f"*{_md_cell(table.caption)}*"]
    return "\n".join(lines) + "\n"


def to_html(table: Table) -> str:
    """An HTML ``<table>`` (cells escaped; ``<br>`` kept as line breaks)."""
    def cell(text: str, tag: str) -> str:
        parts = [html.escape(p) for p in str(text).split("<br>")]
        return f"<{tag}>{'<br>'.join(parts)}</{tag}>"

    head = "".join(cell(h, "th") for h in table.header)
    body = "\n".join("<tr>" + "".join(cell(c, "td") for c in row) + "</tr>" for row in table.rows)
    caption = f"<caption>{html.escape(table.title)}</caption>"
    note = f'<p class="note">{html.escape(table.caption)}</p>' if table.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>{note}\n"
