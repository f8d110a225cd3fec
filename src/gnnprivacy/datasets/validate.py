"""Pinpoint which raw file is corrupt after a loader failed to parse a dataset.

Used only on the failure path, so a successful load pays nothing. Each check reads a file
the way its format requires (zip CRCs for ``.npz``, gzip stream for ``.gz``, the pickle
opcodes of Planetoid's ``ind.*`` files, numeric text for ``.txt``/``test.index``, a
rectangular table for ``.csv``) and raises on the first problem. Planetoid's ``ind.*`` pickles
are parsed, never unpickled (`gnnprivacy.datasets.pickles`): a file that names anything but
arrays and containers is refused without running it.

`validate_data` checks the in-memory graph a method is about to train on (shapes, dtypes,
masks, NaN/inf, classes); the runner calls it for every dataset, and so does ``gnnprivacy.train``.
"""

from __future__ import annotations

import csv
import gzip
import zipfile
from pathlib import Path

import numpy as np

from gnnprivacy.errors import InvalidParameterError, UnknownNameError


def check_raw_file(path: Path) -> None:
    """Raise an exception if ``path`` is not a readable, well-formed file of its format."""
    if path.stat().st_size == 0:
        raise ValueError("empty file")
    name = path.name
    if name.endswith(".npz"):
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
            if bad is not None:
                raise ValueError(f"bad CRC in member {bad}")
    elif name.endswith(".gz"):
        with gzip.open(path, "rb") as stream:
            while stream.read(1 << 20):
                pass
    elif name.endswith(".test.index") or name.endswith(".txt"):
        with open(path, encoding="utf-8") as stream:  # TU files separate columns with ", "
            delimiter = "," if "," in stream.readline() else None
        np.loadtxt(path, ndmin=2, delimiter=delimiter)
    elif name.startswith("ind."):  # a pickle: parsed for what it names, never unpickled
        from gnnprivacy.datasets.pickles import check_planetoid_pickle

        check_planetoid_pickle(path)
    elif name.endswith(".csv"):
        _check_csv(path)


def _check_csv(path: Path) -> None:
    with open(path, newline="", encoding="utf-8") as stream:
        rows = csv.reader(stream)
        header = next(rows)
        for line, row in enumerate(rows, start=2):
            if len(row) != len(header):
                raise ValueError(f"line {line} has {len(row)} fields, header has {len(header)}")


def find_corrupt(folder: Path, relative_paths) -> tuple[str, str] | None:
    """The first of ``relative_paths`` (under ``folder``) failing `check_raw_file`.

    Returns:
        ``(relative path, reason)`` or ``None`` when every file passes.
    """
    for rel in relative_paths:
        try:
            check_raw_file(folder / rel)
        except Exception as exc:  # noqa: BLE001 - any failure means "this file is bad"
            return rel, f"{type(exc).__name__}: {exc}"
    return None


# -- the graph a method trains on ------------------------------------------------------------

TASKS = ("node_classification",)
_MASK_NAMES = ("train_mask", "val_mask", "test_mask")


def _bad(what: str, expected: str, received) -> InvalidParameterError:
    return InvalidParameterError(what, expected, received, where="data")


def _split_hint(data) -> str:
    split = getattr(data, "split", None)
    fracs = getattr(split, "fractions", None)
    if callable(fracs):
        fracs = fracs()
    if fracs:
        return (f" (split {getattr(split, 'kind', '?')!r} with train/val/test fractions "
                f"{tuple(round(float(f), 4) for f in fracs)}; change --train-frac/--val-frac/--test-frac "
                "or the masks)")
    return " (set train_mask / test_mask, or change --train-frac/--val-frac/--test-frac)"


def check_storage(data) -> None:
    """Refuse tensors without usable values before anything reads them: a tensor on the
    ``meta`` device (a shape, no data) or a sparse one (``x.to_dense()`` first), for ``x``,
    ``y``, ``edge_index`` and the masks; and a ``num_nodes`` set to something else than the
    number of rows of ``x``.

    Raises:
        InvalidParameterError: naming the attribute, what was expected and what was received.
    """
    import torch

    for name in ("x", "y", "edge_index", *_MASK_NAMES):
        t = getattr(data, name, None)
        if not isinstance(t, torch.Tensor):
            continue
        if t.device.type == "meta":
            raise _bad(name, "a tensor holding values (on cpu or cuda)",
                       "a tensor on the meta device (a shape without values)")
        if t.layout != torch.strided:
            raise _bad(name, f"a dense tensor (e.g. {name}.to_dense())", f"a {t.layout} tensor")
    x = getattr(data, "x", None)
    store = getattr(data, "_store", None)
    explicit = store.get("num_nodes") if hasattr(store, "get") else None
    if isinstance(x, torch.Tensor) and x.dim() >= 1 and explicit is not None and int(explicit) != int(x.shape[0]):
        raise _bad("num_nodes", f"the number of rows of x ({int(x.shape[0])}) or unset", int(explicit))


def validate_data(data, *, task: str = "node_classification") -> None:
    """Refuse a graph that no method can train on honestly, with a message naming the problem.

    Checks, in this order: no tensor is on the ``meta`` device or sparse, and an explicit
    ``num_nodes`` matches ``x`` (`check_storage`); ``x`` is a 2-D floating tensor without NaN or infinite entries (the
    message counts them); ``y`` is a 1-D integer tensor with one non-negative label per node;
    ``edge_index`` is an integer ``[2, E]`` tensor with node ids in ``[0, n)``; ``train_mask``,
    ``val_mask`` (optional) and ``test_mask`` are boolean of length ``n``, pairwise disjoint, and
    the training and test sets are non-empty; the training labels hold at least two classes.

    Args:
        data: a ``torch_geometric.data.Data`` (or any object with those attributes).
        task: ``"node_classification"`` (the only task today).

    Raises:
        InvalidParameterError: the first problem found; the message names the attribute, what
            was expected and what was received (for the split: its fractions).

    *Privacy*: the check reads the data and releases nothing beyond pass/fail; it runs before
    training, so a refused graph spends no privacy budget.
    """
    import torch

    if task not in TASKS:
        raise UnknownNameError("task", task, TASKS)
    check_storage(data)
    x = getattr(data, "x", None)
    if not isinstance(x, torch.Tensor):
        raise _bad("x", "a node feature tensor [num_nodes, num_features]", type(x).__name__)
    if x.dim() != 2:
        raise _bad("x", "a 2-D tensor [num_nodes, num_features]", f"shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise _bad("x", "a floating-point tensor (e.g. x.float())", str(x.dtype))
    n = int(x.shape[0])
    if n == 0 or x.shape[1] == 0:
        raise _bad("x", "at least one node and one feature", f"shape {tuple(x.shape)}")
    finite = torch.isfinite(x)
    if not bool(finite.all()):
        n_nan = int(torch.isnan(x).sum())
        n_inf = int((~finite).sum()) - n_nan
        rows = int((~finite).any(dim=1).sum())
        raise _bad("x", "finite node features (no NaN or inf)",
                   f"{n_nan} NaN and {n_inf} infinite entries in {rows} of {n} nodes")
    y = getattr(data, "y", None)
    if not isinstance(y, torch.Tensor):
        raise _bad("y", "a label tensor [num_nodes]", type(y).__name__)
    if y.dim() == 2 and y.shape[1] == 1:
        y = y.view(-1)
    if y.dim() != 1 or int(y.shape[0]) != n:
        raise _bad("y", f"a 1-D tensor with one label per node ({n})", f"shape {tuple(y.shape)}")
    if y.is_floating_point() or y.dtype == torch.bool or y.is_complex():
        raise _bad("y", "integer class labels (e.g. y.long())", str(y.dtype))
    if n and int(y.min()) < 0:
        raise _bad("y", "class labels >= 0", f"{int((y < 0).sum())} negative labels (min {int(y.min())})")
    ei = getattr(data, "edge_index", None)
    if not isinstance(ei, torch.Tensor):
        raise _bad("edge_index", "an integer tensor [2, num_edges]", type(ei).__name__)
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise _bad("edge_index", "shape [2, num_edges]", f"shape {tuple(ei.shape)}")
    if ei.is_floating_point() or ei.dtype == torch.bool or ei.is_complex():
        raise _bad("edge_index", "an integer tensor (e.g. edge_index.long())", str(ei.dtype))
    if ei.numel():
        lo, hi = int(ei.min()), int(ei.max())
        if lo < 0 or hi >= n:
            bad = int(((ei < 0) | (ei >= n)).any(dim=0).sum())
            raise _bad("edge_index", f"node ids in [0, {n})",
                       f"{bad} edges with ids outside (min {lo}, max {hi})")
    masks = {}
    for name in _MASK_NAMES:
        m = getattr(data, name, None)
        if m is None:
            if name == "val_mask":
                continue
            raise _bad(name, f"a boolean mask of length {n}" + _split_hint(data), None)
        if not isinstance(m, torch.Tensor) or m.dtype != torch.bool:
            got = str(m.dtype) if isinstance(m, torch.Tensor) else type(m).__name__
            raise _bad(name, "a torch.bool tensor (index arrays: build a mask with "
                       "torch.zeros(n, dtype=torch.bool) and set it)", got)
        if m.dim() != 1 or int(m.shape[0]) != n:
            raise _bad(name, f"a 1-D mask of length num_nodes ({n})", f"shape {tuple(m.shape)}")
        masks[name] = m
    names = list(masks)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            both = int((masks[a] & masks[b]).sum())
            if both:
                raise _bad(f"{a} and {b}", "disjoint node sets", f"{both} nodes in both")
    for name, what in (("train_mask", "training"), ("test_mask", "test")):
        if not bool(masks[name].any()):
            raise _bad(name, f"a non-empty {what} set" + _split_hint(data), f"0 {what} nodes of {n}")
    train_classes = torch.unique(y[masks["train_mask"]])
    if train_classes.numel() < 2:
        raise _bad("y[train_mask]", "at least 2 classes among the training labels (a one-class "
                   "classifier reports a meaningless accuracy)",
                   f"only class {int(train_classes[0])} in {int(masks['train_mask'].sum())} training nodes")


# -- lists of graphs (graph-level tasks) ---------------------------------------------------------

def _graph_bad(i: int, what: str, expected: str, received) -> InvalidParameterError:
    return InvalidParameterError(f"graph {i}: {what}", expected, received, where="dataset")


def _shape(lead, rest: tuple) -> str:
    return "[" + ", ".join(str(v) for v in (lead, *rest)) + "]"


def _kind(t) -> str:
    return "floating-point" if t.is_floating_point() else (
        "bool" if str(t.dtype) == "torch.bool" else "complex" if t.is_complex() else "integer")


def validate_graphs(graphs, *, classification: bool = False, labels: bool = True) -> None:
    """Refuse a list of graphs that no graph-level method can train on honestly, naming the
    first bad graph (its index in the list) and what is wrong with it.

    Every graph: a ``torch_geometric.data.Data`` with dense tensors (`check_storage`); ``x`` a
    2-D tensor with at least one node and one feature, of one width and one dtype over all
    graphs, finite when floating-point (integer features, e.g. atom types for an embedding,
    are kept as they are); ``edge_index`` an integer ``[2, E]`` tensor with ids in
    ``[0, num_nodes)`` of its own graph (an empty ``torch.zeros(2, 0, dtype=torch.long)`` for a
    graph without edges); ``y`` one label row (shape ``[1]`` or ``[1, k]``), of one kind and
    shape over all graphs, finite when floating-point (a regression target), ``>= 0`` when
    integer (class ids); ``edge_attr`` on every graph or none, one row per edge, one width,
    finite.

    Args:
        graphs: a sequence of graphs (already a list; `GraphSampler` and the TU loader build it).
        classification: the labels must be integer class ids (the built-in graph task).
        labels: check ``y`` (``False``: graphs to predict on, which need none).

    Raises:
        InvalidParameterError: ``dataset: parameter 'graph i: x' must be ...; received ...``.
    """
    import torch
    from torch_geometric.data import Data

    first: dict = {}
    for i, g in enumerate(graphs):
        if not isinstance(g, Data):
            raise InvalidParameterError("dataset", "a sequence of torch_geometric Data graphs",
                                        f"item {i} of type {type(g).__name__}")
        try:
            check_storage(g)
        except InvalidParameterError as exc:
            raise _graph_bad(i, exc.name, exc.expected, exc.received) from None
        x = getattr(g, "x", None)
        if not isinstance(x, torch.Tensor):
            raise _graph_bad(i, "x", "node features (give featureless graphs constant or degree "
                             "features first, e.g. torch_geometric.transforms.Constant() or "
                             "OneHotDegree(max_degree))", type(x).__name__)
        if x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
            raise _graph_bad(i, "x", "a 2-D tensor [num_nodes, num_features] with at least one "
                             "node and one feature", f"shape {tuple(x.shape)}")
        if x.is_complex() or x.dtype == torch.bool:
            raise _graph_bad(i, "x", "real-valued features (floating-point, or integer ids for "
                             "an embedding)", str(x.dtype))
        n = int(x.shape[0])
        if "x" not in first:
            first["x"] = (int(x.shape[1]), x.dtype)
        elif int(x.shape[1]) != first["x"][0]:
            raise _graph_bad(i, "x", f"{first['x'][0]} features per node, as graph 0",
                             f"{int(x.shape[1])} features")
        elif x.is_floating_point() != first["x"][1].is_floating_point:
            raise _graph_bad(i, "x", f"{_kind(torch.empty(0, dtype=first['x'][1]))} features, as "
                             "graph 0 (batches concatenate the graphs' features)", str(x.dtype))
        if x.is_floating_point():
            finite = torch.isfinite(x)
            if not bool(finite.all()):
                n_nan = int(torch.isnan(x).sum())
                raise _graph_bad(i, "x", "finite node features (no NaN or inf)",
                                 f"{n_nan} NaN and {int((~finite).sum()) - n_nan} infinite "
                                 f"entries in {int((~finite).any(1).sum())} of {n} nodes")
        ei = getattr(g, "edge_index", None)
        if not isinstance(ei, torch.Tensor):
            raise _graph_bad(i, "edge_index", "an integer tensor [2, num_edges] (a graph without "
                             "edges: torch.zeros(2, 0, dtype=torch.long))", type(ei).__name__)
        if ei.dim() != 2 or ei.shape[0] != 2:
            raise _graph_bad(i, "edge_index", "shape [2, num_edges]", f"shape {tuple(ei.shape)}")
        if _kind(ei) != "integer":
            raise _graph_bad(i, "edge_index", "an integer tensor (e.g. edge_index.long())",
                             str(ei.dtype))
        if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
            raise _graph_bad(i, "edge_index", f"node ids in [0, {n}) of its own graph (local ids; "
                             "an id past its nodes would join the next graph of a batch)",
                             f"ids {int(ei.min())}..{int(ei.max())}")
        if labels:
            _check_graph_label(i, getattr(g, "y", None), first, classification)
        ea = getattr(g, "edge_attr", None)
        if i == 0:
            first["edge_attr"] = ea is not None
        elif (ea is not None) != first["edge_attr"]:
            raise _graph_bad(i, "edge_attr", "edge_attr on every graph or on none (graph 0 "
                             f"{'has' if first['edge_attr'] else 'has none'})",
                             "none" if ea is None else "edge_attr")
        if ea is None:
            continue
        if not isinstance(ea, torch.Tensor) or ea.dim() == 0 or ea.shape[0] != ei.shape[1]:
            raise _graph_bad(i, "edge_attr", f"one row per edge ({int(ei.shape[1])} rows)",
                             f"shape {tuple(ea.shape)}" if isinstance(ea, torch.Tensor)
                             else type(ea).__name__)
        if "edge_attr_shape" not in first:
            first["edge_attr_shape"] = (tuple(ea.shape[1:]), ea.is_floating_point())
        elif (tuple(ea.shape[1:]), ea.is_floating_point()) != first["edge_attr_shape"]:
            raise _graph_bad(i, "edge_attr", "edge features of shape "
                             f"{_shape('E', first['edge_attr_shape'][0])} and kind as graph 0",
                             f"shape {tuple(ea.shape)}, {ea.dtype}")
        if ea.is_floating_point() and not bool(torch.isfinite(ea).all()):
            bad = ~torch.isfinite(ea.reshape(ea.shape[0], -1))
            raise _graph_bad(i, "edge_attr", "finite edge features (no NaN or inf)",
                             f"{int(bad.any(1).sum())} of {int(ea.shape[0])} edges with a "
                             "non-finite value")


def _check_graph_label(i: int, y, first: dict, classification: bool) -> None:
    """Graph ``i``'s label ``y``: one row, of graph 0's kind and shape (`validate_graphs`)."""
    import torch

    if not isinstance(y, torch.Tensor):
        raise _graph_bad(i, "y", "a label tensor of shape [1] (one label per graph)",
                         type(y).__name__)
    if y.dim() == 0 or y.shape[0] != 1 or y.numel() == 0:
        raise _graph_bad(i, "y", "one label row per graph (shape [1] or [1, k], e.g. "
                         "y.view(1); a label per node belongs to the node samplers)",
                         f"shape {tuple(y.shape)}")
    kind = _kind(y)
    if kind in ("bool", "complex") or (classification and kind != "integer"):
        raise _graph_bad(i, "y", "integer class labels (e.g. y.long())" if classification
                         else "integer class labels or a floating-point target", str(y.dtype))
    if "y" not in first:
        first["y"] = (kind, tuple(y.shape[1:]))
    elif (kind, tuple(y.shape[1:])) != first["y"]:
        raise _graph_bad(i, "y", f"{first['y'][0]} labels of shape {_shape(1, first['y'][1])}"
                         ", as graph 0", f"{kind} labels of shape {tuple(y.shape)}")
    if kind == "integer" and int(y.min()) < 0:
        raise _graph_bad(i, "y", "class labels >= 0", int(y.min()))
    if kind == "floating-point" and not bool(torch.isfinite(y).all()):
        raise _graph_bad(i, "y", "a finite target (no NaN or inf)", y.tolist())


def validate_graph_set(gset) -> None:
    """Refuse a graph-classification dataset with its split (a
    `gnnprivacy.datasets.tu_graphs.GraphSet`) that no method can train and score honestly:
    every graph as `validate_graphs` (integer class labels), at least 2 training graphs of
    at least 2 classes, and at least one test graph.

    Raises:
        InvalidParameterError: naming the graph, or the split with its sizes and fractions.
    """
    import torch

    validate_graphs(gset.graphs, classification=True)
    sizes = {part: len(getattr(gset.split, f"{part}_idx")) for part in ("train", "val", "test")}
    fracs = tuple(round(float(f), 4) for f in (gset.split.train_frac, gset.split.val_frac,
                                                gset.split.test_frac))
    hint = (f" (a stratified split of {len(gset.graphs)} graphs with train/val/test fractions "
            f"{fracs}; change --train-frac/--val-frac/--test-frac)")
    if sizes["train"] < 2:
        raise InvalidParameterError("train graphs", "at least 2 training graphs" + hint,
                                    f"{sizes['train']} graphs")
    if sizes["test"] < 1:
        raise InvalidParameterError("test graphs", "a non-empty test set" + hint, "0 graphs")
    labels = torch.tensor([int(gset.graphs[int(i)].y.view(-1)[0]) for i in gset.split.train_idx])
    classes = torch.unique(labels)
    if classes.numel() < 2:
        raise InvalidParameterError(
            "y of the training graphs", "at least 2 classes (a one-class classifier reports a "
            "meaningless accuracy)", f"only class {int(classes[0])} in {sizes['train']} "
            "training graphs")
