"""What a run publishes, checked against what it released with noise (the code audit's
``publication`` check).

The engine's guarantee covers its noisy releases; a value computed from the private data
and published beside them (a clipped sum's norm in a log line, a training statistic in the
record, a hash of the features in a checkpoint) is covered by nothing. This check finds such
values without knowing where they hide, by the coupling a differential-privacy proof uses:

1. run ``A`` trains on the data, recording every noisy release in order
   (`gnnprivacy.training.dp.audit_hooks.taped`: each engine step's noisy sums, GAP's
   noisy aggregations);
2. run ``B`` trains on a *counterfactual* copy whose private units carry other data (every
   training node's features and label changed, or every training graph's), while each of
   its releases is replaced by ``A``'s (the tape replays them);
3. everything the two runs publish is compared: what the run returns (the record and the
   model files it wrote, or ``pt.privacy``, the state dicts and whatever a user's loop
   returns), the lines sent to ``log`` and progress, standard output and error, ``logging``
   records and warnings.

Since ``B`` released exactly ``A``'s noisy values, a published value that depends only on
the releases and on public facts is equal in both runs; a value that differs depends on the
private data by another way and must be named in the run's ``privacy["unaccounted"]``: an
entry that contains the value's path in backticks (``"`metrics` ..."`` covers every metric).
A line of text (a log line, printed output) may differ only in numbers that are covered
values (a test accuracy printed in the run's last log line). Anything else fails the check,
with its path and both values. A run whose number or shapes of releases changed with the
data fails too (`ReleaseTape.faults`).

What it cannot see: under a node or graph unit the graph's edges are the same in both runs
(the samplers draw from them; what depends on the structure is the occurrence and rate
checks' to judge; under the edge unit it is the edges that move, `counterfactual`), and a
value published through a channel it does not capture (a file written outside the run's
outputs, the network).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

__all__ = ["counterfactual", "differences", "publication_check"]

#: keys whose values are wall-clock times, never compared
TIMING_KEYS = frozenset({"timings", "created", "seconds", "elapsed", "elapsed_seconds"})
_DURATION = re.compile(r"\d+:\d\d:\d\d|\d+(\.\d+)?\s?s\b|\d+(\.\d+)?\s?ms\b")


def counterfactual(data, unit: str = "node"):
    """A copy of ``data`` in which every private unit carries other data: each training
    node's features ``x -> 1 - x`` and label ``y -> (y + 1) mod C`` (a PyG ``Data`` with a
    ``train_mask``); every graph's of a list of graphs; the training graphs' of a
    `GraphSet`. Sizes, edges and the other nodes are unchanged. For the edge unit
    (``unit="edge"``: features and labels are public) every edge moves instead: ``(u, v) ->
    (u + 1, v + 1) mod n`` (as many edges, symmetric if they were, no self-loop added), and
    the features and labels are unchanged."""
    from torch_geometric.data import Data

    if unit == "edge":
        if not isinstance(data, Data):
            raise TypeError("an edge-level counterfactual needs one graph (a PyG Data)")
        out = data.clone()
        out.edge_index = (data.edge_index + 1) % int(data.num_nodes)
        return out
    if isinstance(data, Data):
        mask = getattr(data, "train_mask", None)
        if mask is None:
            raise TypeError("a node-level counterfactual needs data.train_mask")
        out = data.clone()
        classes = _classes([data.y[mask]])
        out.x, out.y = _flip_x(data.x, mask), _shift_y(data.y, mask, classes)
        return out
    graphs = getattr(data, "graphs", None)
    if graphs is not None:                            # a GraphSet: its training graphs
        import dataclasses

        train = {int(i) for i in data.split.train_idx}
        new = [_flip_graph(g, _classes([h.y for h in graphs])) if i in train else g
               for i, g in enumerate(graphs)]
        return dataclasses.replace(data, graphs=new)
    graphs = list(data)
    classes = _classes([g.y for g in graphs])
    return [_flip_graph(g, classes) for g in graphs]


def _classes(ys) -> int:
    return max((int(y.max()) + 1 for y in ys if y.numel() and not y.is_floating_point()),
               default=2)


def _flip_x(x: Tensor, mask: Tensor | None = None) -> Tensor:
    out = x.clone()
    rows = slice(None) if mask is None else mask
    out[rows] = (1 - x[rows].double()).to(x.dtype) if x.is_floating_point() else 1 - x[rows]
    return out


def _shift_y(y: Tensor, mask: Tensor | None, classes: int) -> Tensor:
    out = y.clone()
    rows = slice(None) if mask is None else mask
    if y.is_floating_point():
        out[rows] = 1 - y[rows]
    else:
        out[rows] = torch.where(y[rows] >= 0, (y[rows] + 1) % classes, y[rows])
    return out


def _flip_graph(g, classes: int):
    out = g.clone()
    out.x, out.y = _flip_x(g.x), _shift_y(g.y, None, classes)
    return out


@contextlib.contextmanager
def captured():
    """Standard output and error, every ``logging`` record and every warning of the
    enclosed code, as lists of lines (in the yielded dict)."""
    channels: dict[str, list] = {"stdout": [], "stderr": [], "logging": [], "warnings": []}
    out, err = io.StringIO(), io.StringIO()

    class _Sink(logging.Handler):
        def emit(self, record):
            channels["logging"].append(f"{record.name}: {record.getMessage()}")

    handler, root = _Sink(level=logging.DEBUG), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        with warnings.catch_warnings(record=True) as seen, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            yield channels
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        channels["warnings"] = [f"{w.category.__name__}: {w.message}" for w in seen]
        channels["stdout"] = out.getvalue().splitlines()
        channels["stderr"] = err.getvalue().splitlines()


def differences(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every place where two published values differ: ``(path, a, b)``; wall-clock times
    (`TIMING_KEYS`, durations inside text) are not compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            if str(key) in TIMING_KEYS or str(key).endswith("_seconds"):
                continue
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                out.append((sub, a.get(key, "<absent>"), b.get(key, "<absent>")))
            else:
                out += differences(a[key], b[key], sub)
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [(path, f"{len(a)} items", f"{len(b)} items")]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        same = (isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and torch.equal(torch.nan_to_num(a.detach().cpu()),
                                                       torch.nan_to_num(b.detach().cpu())))
        return [] if same else [(path, _brief(a), _brief(b))]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    if isinstance(a, str) and isinstance(b, str):
        return [] if _DURATION.sub("<t>", a) == _DURATION.sub("<t>", b) else [(path, a, b)]
    return [] if a == b else [(path, a, b)]


def _brief(v):
    if isinstance(v, Tensor):
        return f"tensor{tuple(v.shape)} sum {float(v.double().sum()):.6g}"
    return v


def covered(path: str, unaccounted: list[str]) -> bool:
    """Whether an ``unaccounted`` entry names a part of ``path`` in backticks: a run of its
    components (``"`metrics`"`` covers ``record.metrics.test_accuracy`` and the same field
    of the record a model file embeds)."""
    parts = [p for p in re.split(r"[.\[\]]", path) if p]
    names = {".".join(parts[i:j]) for i in range(len(parts))
             for j in range(i + 1, len(parts) + 1)}
    return any(f"`{name}`" in entry for entry in unaccounted for name in names)


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _masked(text: str, values: list[float]) -> str:
    """``text`` with every number that is one of ``values`` (at the precision it is
    printed) replaced: a line may differ between the runs only in covered values."""
    def mask(match):
        token = match.group()
        decimals = len(token.split(".")[1].split("e")[0]) if "." in token else 0
        x = float(token)
        if any(abs(x - v) <= 0.5 * 10 ** -decimals + 1e-12 * abs(v) for v in values):
            return "<covered>"
        return token

    return _NUMBER.sub(mask, text)


def _numbers(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    return []


def publication_check(train: Callable[[Any], dict], data, *,
                      unaccounted: Callable[[dict], list] | None = None) -> dict[str, Any]:
    """The check described in the module docstring.

    Args:
        train: ``train(data) -> dict`` of what the run publishes (it must train the same
            way on any data of the same shape: same seeds, same settings).
        data: the private data (a node-level ``Data``, a list of graphs, a `GraphSet`).
        unaccounted: reads the run's ``privacy["unaccounted"]`` from what ``train``
            returned (default: ``out["privacy"]["unaccounted"]``, or ``out["record"]``'s).

    Returns:
        A check dict: ``checked``, ``passed``, ``differences`` (uncovered, at most 10),
        ``covered`` (paths named in ``unaccounted``), ``releases`` (per run).
    """
    from gnnprivacy.training.dp.audit_hooks import taped

    with taped() as tape_a, captured() as chan_a:
        out_a = train(data)
    with taped(pinned=tape_a.values) as tape_b, captured() as chan_b:
        out_b = train(counterfactual(data, _unit(out_a)))
    result: dict[str, Any] = {"checked": True, "releases": len(tape_a.values)}
    if not tape_b.faults and len(tape_b.values) < len(tape_a.values):
        tape_b.faults.append(f"{len(tape_b.values)} releases where the recorded run made "
                             f"{len(tape_a.values)}")
    if tape_b.faults:
        return {**result, "passed": False, "detail": "the releases depend on the data: "
                + tape_b.faults[0]}
    if not tape_a.values:
        return {"checked": False, "why": "the run made no noisy release"}
    read = unaccounted or _unaccounted
    notes = list(read(out_a) or [])
    diffs = differences({**out_a, **chan_a}, {**out_b, **chan_b})
    ok = [d for d in diffs if covered(d[0], notes)]
    values_a = [v for _, x, _ in ok for v in _numbers(x)]
    values_b = [v for _, _, y in ok for v in _numbers(y)]
    bad = [(p, x, y) for p, x, y in diffs if not covered(p, notes) and not (
        isinstance(x, str) and isinstance(y, str)
        and _masked(x, values_a) == _masked(y, values_b))]
    result.update(covered=sorted({d[0] for d in diffs} - {d[0] for d in bad})[:20],
                  differences=[{"path": p, "run": _brief(x), "counterfactual": _brief(y)}
                               for p, x, y in bad[:10]],
                  passed=not bad)
    if bad:
        p, x, y = bad[0]
        result["detail"] = (f"{len(bad)} published value(s) depend on the private data beyond "
                            f"the noisy releases and are not in privacy['unaccounted'], e.g. "
                            f"{p}: {_brief(x)!r} vs {_brief(y)!r}")
    return result


def _privacy_dicts(out: dict) -> list[dict]:
    """The ``privacy`` dicts a run published: its own, then its record's."""
    return [h for h in (out.get("privacy"), (out.get("record") or {}).get("privacy"))
            if isinstance(h, dict)]


def _unit(out: dict) -> str:
    """The run's privacy unit, as its ``privacy["unit"]`` (or its record's) names it."""
    return next((str(h["unit"]).lower() for h in _privacy_dicts(out) if h.get("unit")),
                "node")


def _unaccounted(out: dict) -> list:
    return next((h.get("unaccounted", []) for h in _privacy_dicts(out)), [])
