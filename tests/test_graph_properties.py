"""Property tests (hypothesis) of the graph entry points and the saved-model files (issue 45):
random lists of graphs for ``make_private(sampler="graphs")``, random TU folders for
``train --task graph``, and damaged saved-model files of every kind the library writes.

The property, each time: no traceback (only a ``ValueError`` / ``GnnPrivacyError`` with a
one-line message) and no silent acceptance (an input that an independent oracle here calls
invalid is refused; a valid one trains, or loads and predicts finite logits).
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F
from torch_geometric.data import Data

import gnnprivacy as gp
from gnnprivacy.errors import GnnPrivacyError

def SETTINGS(examples: int):
    return settings(deadline=None, derandomize=True, database=None, max_examples=examples,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _one_line(exc: BaseException) -> None:
    assert isinstance(exc, (ValueError, GnnPrivacyError)), repr(exc)
    assert "\n" not in str(exc).strip() and "Traceback" not in str(exc), str(exc)


# -- lists of graphs for make_private(sampler="graphs") ------------------------------------------

@st.composite
def graph_lists(draw):
    """2-7 small graphs of random sizes and widths, valid, or with one kind of damage in a
    random graph: NaN/inf features, another width, an empty graph, an id past the graph, a
    float edge_index, a 0-d, negative or per-node label, or a whole list of another dtype."""
    width = draw(st.sampled_from([1, 3]))
    n = draw(st.integers(2, 7))
    damage = draw(st.sampled_from([None] * 6 + ["nan", "width", "empty", "past", "float-edges",
                                                "0d", "negative", "rows", "one", "bool",
                                                "int", "float64", "float-y"]))
    hit = draw(st.integers(0, n - 1))
    graphs = []
    for i in range(n):
        nodes = draw(st.integers(1, 5)) if not (damage == "empty" and i == hit) else 0
        w = width + 1 if damage == "width" and i == hit else width
        x = torch.randn(nodes, w, generator=torch.Generator().manual_seed(i))
        x = {"int": (x * 3).long(), "bool": x > 0, "float64": x.double()}.get(damage, x)
        if damage == "nan" and i == hit:
            x[0, 0] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        m = draw(st.integers(0, 6)) if nodes else 0
        ei = torch.tensor([[draw(st.integers(0, nodes - 1)) for _ in range(m)],
                           [draw(st.integers(0, nodes - 1)) for _ in range(m)]],
                          dtype=torch.long).view(2, m)                  # self-loops allowed
        if damage == "past" and i == hit:
            ei = torch.cat([ei, torch.tensor([[0], [nodes]])], 1)
        if damage == "float-edges" and i == hit:
            ei = ei.float()
        y = torch.tensor([i % 3])
        if i == hit:
            y = {"0d": torch.tensor(1), "negative": torch.tensor([-1]),
                 "rows": torch.zeros(nodes + 1, dtype=torch.long)}.get(damage, y)
        if damage == "float-y":
            y = torch.randn(1)                                          # a regression target
        graphs.append(Data(x=x, edge_index=ei, y=y))
    return graphs[:1] if damage == "one" else graphs


def _valid_graphs(graphs) -> bool:
    """The oracle: what make_private(sampler="graphs") must accept (written independently of
    the library's validation)."""
    if len(graphs) < 2:
        return False
    w, floating, ykind = graphs[0].x.shape[1], graphs[0].x.is_floating_point(), None
    for g in graphs:
        x, ei, y = g.x, g.edge_index, g.y
        if x.dtype == torch.bool or x.shape[0] == 0 or x.shape[1] != w:
            return False
        if x.is_floating_point() != floating or (floating and not torch.isfinite(x).all()):
            return False
        if ei.is_floating_point() or (ei.numel() and int(ei.max()) >= x.shape[0]):
            return False
        if y.dim() == 0 or y.shape[0] != 1:
            return False
        kind = "float" if y.is_floating_point() else "int"
        if ykind not in (None, kind) or (kind == "int" and int(y.min()) < 0):
            return False
        ykind = kind
    return True


class _Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        from torch_geometric.nn import GCNConv, global_mean_pool

        self.conv, self.head, self.pool = GCNConv(width, 4), nn.Linear(4, 3), global_mean_pool

    def forward(self, x, edge_index, batch):
        return self.head(self.pool(torch.relu(self.conv(x.float(), edge_index)), batch))


@SETTINGS(60)
@given(graphs=graph_lists())
def test_make_private_graphs_refuses_or_trains(graphs):
    valid = _valid_graphs(graphs)
    width = graphs[0].x.shape[1] if graphs else 1
    torch.manual_seed(0)
    model = _Net(width)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        pt = gp.make_private(model, opt, graphs, sampler="graphs", noise_multiplier=1.0,
                             steps=2, seed=0, batch_size=2)
    except Exception as exc:                # noqa: BLE001 - the property is about any failure
        _one_line(exc)
        assert not valid, f"a valid list was refused: {exc}"
        event("refused")
        return
    assert valid, "an invalid list of graphs was accepted"
    event("trained")
    try:
        for b in pt.loader:
            opt.zero_grad()
            out = model(b.x, b.edge_index, b.batch)
            loss = (F.mse_loss(out[:, 0], b.y.view(-1)) if b.y.is_floating_point()
                    else F.cross_entropy(out, b.y))
            loss.backward()
            opt.step()
    finally:
        pt.close()
    assert pt.steps == 2 and all(torch.isfinite(p).all() for p in model.parameters())


def test_control_the_oracle_refuses_what_the_library_checks():
    """Control: the oracle is not vacuous: it refuses a NaN, another width and a 0-d label."""
    base = [Data(x=torch.ones(2, 3), edge_index=torch.tensor([[0], [1]]), y=torch.tensor([i]))
            for i in range(2)]
    assert _valid_graphs(base)
    for change in ({"x": torch.tensor([[math.nan] * 3] * 2)}, {"x": torch.ones(2, 4)},
                   {"y": torch.tensor(1)}):
        bad = [base[0], Data(**{**{"x": base[1].x, "edge_index": base[1].edge_index,
                                   "y": base[1].y}, **change})]
        assert not _valid_graphs(bad)


# -- train --task graph on random TU folders ----------------------------------------------------

@st.composite
def tu_folders(draw):
    """The five COX2 files of a random small graph dataset (24-40 graphs, self-loops, 2-3
    classes, at least one edge), valid or with one kind of damage: a graph without nodes,
    NaN/inf attributes, one class, an edge past the nodes, a truncated ``_A.txt``."""
    n = draw(st.integers(24, 40))
    damage = draw(st.sampled_from([None, None, None, "empty", "nan", "one-class", "past",
                                   "truncated"]))
    sizes = [draw(st.integers(1, 5)) for _ in range(n - 1)] + [draw(st.integers(2, 5))]
    if damage == "empty":
        sizes[draw(st.integers(0, n - 1))] = 0
    classes = 1 if damage == "one-class" else draw(st.sampled_from([2, 3]))
    labels = [i % classes for i in range(n)]
    indicator = [g + 1 for g, k in enumerate(sizes) for _ in range(k)]
    total = len(indicator)
    edges, first = [], 0
    for k in sizes:
        for _ in range(draw(st.integers(0, 2 * k)) if k else 0):
            a, b = draw(st.integers(0, k - 1)), draw(st.integers(0, k - 1))
            edges.append((first + a + 1, first + b + 1))
        first += k
    # PyG's TU reader cannot read a one-line _A.txt, drops self-loops and then the graphs
    # after the last one with an edge (the loader names both): valid data here ends with an
    # edge (its last graph has two nodes or more)
    edges += [(first - 1, first), (first, first - 1)]
    if damage == "past":
        edges.append((total + 3, 1))
    attrs = [[draw(st.sampled_from([0.5, -1.0, 2.0])) for _ in range(2)] for _ in range(total)]
    if damage == "nan":
        attrs[draw(st.integers(0, total - 1))][1] = draw(st.sampled_from([math.nan, math.inf]))
    files = {"A": "".join(f"{a}, {b}\n" for a, b in edges),
             "graph_indicator": "".join(f"{g}\n" for g in indicator),
             "graph_labels": "".join(f"{c}\n" for c in labels),
             "node_labels": "".join(f"{i % 3}\n" for i in range(total)),
             "node_attributes": "".join(", ".join(str(v) for v in row) + "\n" for row in attrs)}
    if damage == "truncated":
        files["A"] = files["A"][: max(0, len(files["A"]) // 2 - 1)]
    return files, damage is not None


@pytest.fixture(scope="module")
def tu_root(tmp_path_factory):
    return tmp_path_factory.mktemp("tu")


@SETTINGS(15)
@given(folder=tu_folders())
def test_train_graph_task_on_a_random_tu_folder_refuses_or_trains(folder, tu_root):
    import shutil

    files, bad = folder
    root = tu_root / "data"
    shutil.rmtree(root, ignore_errors=True)
    (root / "COX2" / "raw").mkdir(parents=True)
    for name, text in files.items():
        (root / "COX2" / "raw" / f"COX2_{name}.txt").write_text(text)
    old = os.environ.get("GNNPRIVACY_CACHE")
    os.environ["GNNPRIVACY_CACHE"] = str(tu_root / "cache")
    try:
        result = gp.train("cox2", method="graph", task="graph", epochs=1, hidden=4,
                          data_root=str(root))
    except Exception as exc:                # noqa: BLE001
        _one_line(exc)
        event(f"refused ({'damaged' if bad else 'valid data, a split too small'})")
        return
    finally:
        os.environ.pop("GNNPRIVACY_CACHE") if old is None else os.environ.update(
            GNNPRIVACY_CACHE=old)
    assert not bad, f"damaged graph data was trained on: {result.metrics}"
    event("trained")
    acc = result.metrics["test_accuracy"]
    assert 0.0 <= acc <= 1.0 and result.record.split["sizes"]["test"] > 0


# -- saved-model files of every kind, damaged ---------------------------------------------------

@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """One valid file of each kind, with data to predict on: a built-in trainer's (gcn), a
    transductive method's stored predictions, a gp.save_model node model (GCNConv) and a
    graph classifier saved with its run record (as the graph task writes it)."""
    from torch_geometric.nn import GCNConv

    from gnnprivacy.training.graph_classification import GraphClassifier

    d = tmp_path_factory.mktemp("models")
    data = gp.load_dataset("csbm", num_nodes=120)
    from types import SimpleNamespace

    from gnnprivacy.training.persist import save_model_file

    gcn = gp.train(data, method="gcn", epochs=1)
    stored = SimpleNamespace(logits_=gcn.predict())     # what a transductive method keeps
    files = {"builtin": (gcn.save(str(d / "gcn.model.pt")), data),
             "predictions": (save_model_file(d / "ldp.model.pt", trainer=stored, data=data,
                                             method="ldp-naive", record=gcn.record.to_dict()),
                             data)}
    conv = GCNConv(data.num_features, 4)
    files["user"] = (gp.save_model(conv, d / "conv.pt", init={
        "in_channels": data.num_features, "out_channels": 4}), data)
    graphs = [Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]),
                   y=torch.tensor([i % 2])) for i in range(4)]
    clf = GraphClassifier(2, 2, hidden=4, layers=1)
    files["graph"] = (gp.save_model(clf, d / "g.model.pt", init=clf.init_args,
                                    dataset={"name": "cox2", "task": "graph"},
                                    run_record={**gcn.record.to_dict(), "info": {"task": "graph"}}),
                      graphs)
    return files


def _garbage():
    return st.one_of(st.none(), st.integers(-3, 10**6), st.text(max_size=8),
                     st.lists(st.integers(0, 3), max_size=3),
                     st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                     st.just("{not json"), st.just("[1, 2]"), st.just('{"run": 5}'))


@SETTINGS(80)
@given(kind=st.sampled_from(["builtin", "predictions", "user", "graph"]),
       how=st.sampled_from(["drop", "replace", "tensor", "nan", "truncate"]),
       pick=st.integers(0, 10**6), value=_garbage())
def test_a_damaged_model_file_loads_and_predicts_or_is_refused(model_files, tmp_path, kind,
                                                               how, pick, value):
    path, data = model_files[kind]
    raw = Path(path).read_bytes()
    target = tmp_path / f"damaged-{kind}.pt"
    blob = torch.load(io.BytesIO(raw), weights_only=True)
    keys = sorted(blob)
    if how == "truncate":
        target.write_bytes(raw[: pick % len(raw)])
    else:
        if how == "drop":
            blob.pop(keys[pick % len(keys)])
        elif how == "replace":
            blob[keys[pick % len(keys)]] = value
        else:
            names = sorted(blob["tensors"])
            name = names[pick % len(names)]
            t = blob["tensors"][name]
            blob["tensors"][name] = (torch.full_like(t, math.nan) if how == "nan"
                                     else torch.zeros(t.numel() + 1))
        torch.save(blob, target)
    try:
        loaded = gp.load(str(target))
        logits = loaded.predict(data)
    except Exception as exc:                # noqa: BLE001
        _one_line(exc)
        event(f"refused ({how})")
        return
    event(f"loaded and predicted ({how})")
    assert how not in ("nan", "truncate"), "a damaged file gave predictions"
    assert torch.isfinite(logits).all() and logits.dim() == 2


def test_every_kind_of_model_file_loads_and_predicts(model_files):
    rows = {"builtin": 120, "predictions": 120, "user": 120, "graph": 4}
    for kind, (path, data) in model_files.items():
        logits = gp.load(str(path)).predict(data)
        assert logits.shape[0] == rows[kind] and torch.isfinite(logits).all(), kind


def test_control_without_the_finite_weights_check_a_nan_model_predicts_nan(model_files,
                                                                          tmp_path,
                                                                          monkeypatch):
    """Control: the property's NaN case is caught by the loaders' check, not by luck."""
    path, data = model_files["user"]
    blob = torch.load(path, weights_only=True)
    blob["tensors"] = {k: torch.full_like(v, math.nan) for k, v in blob["tensors"].items()}
    torch.save(blob, tmp_path / "nan.pt")
    with pytest.raises(GnnPrivacyError, match="finite weights"):
        gp.load(str(tmp_path / "nan.pt"))
    monkeypatch.setattr("gnnprivacy.training.user_model.check_finite_weights",
                        lambda tensors, path: None)
    assert torch.isnan(gp.load(str(tmp_path / "nan.pt")).predict(data)).all()
