"""Every shipped training path that releases through the DP engine, as a code audit on a
small graph: the built-in trainers (through the runner, the path of ``gnnprivacy train``),
``make_private`` with each of its samplers in a user's loop, the graph-classification
method, and the sharded paths on one rank. Shared by the path-enumeration, publication,
resume and mutation tests."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.data import Data

import gnnprivacy as gp
from gnnprivacy.auditing.code import audit_method_code, code_audit

#: the private built-in methods whose releases go through the DP engine (audited here)
ENGINE_METHODS = {"heterpoisson": {"q_b": 0.2, "steps": 20},
                  "dpgnn": {"steps": 20, "batch_size": 64},
                  "dpmlp": {"steps": 20, "batch_size": 32},
                  "gap": {"encoder_epochs": 2, "epochs": 2, "max_degree": 5, "batch_size": 64},
                  "edge-dp": {"steps": 20},
                  "link-node-dp": {"steps": 20, "hidden": 16, "out_channels": 8},
                  "link-edge-dp": {"steps": 20, "hidden": 16, "out_channels": 8}}
#: checks a path may not be able to make, with the reason: the link methods' batches carry
#: public negative rows that belong to no subgraph, so the clip check's replay cannot assign
#: the output rows of a step that holds them (it is made on steps without). Any other
#: unchecked check fails the path's test.
_LINK_CLIP = {"engine 0: clip (output rows cannot be assigned to subgraphs)"}
KNOWN_UNCHECKED = {"method:link-edge-dp": _LINK_CLIP, "method:link-node-dp": _LINK_CLIP}
#: private methods that release no DP-SGD step (local DP, perturbed graphs): their noise is
#: a mechanism's, checked by the mechanism audit (`gp.audit(mode="mechanism")`)
NO_ENGINE_METHODS = {"edge-lapgraph", "edge-privhrg", "edge-rand", "edgerr", "feat-duchi",
                     "gap-edge",
                     "feat-hybrid", "feat-multibit", "feat-piecewise", "feat-pm-sub",
                     "feat-three-output", "featurerr", "heterorr", "ldp-naive", "lpgnn",
                     "rgnn"}


def node_data(num_nodes: int = 400):
    return gp.load_dataset("csbm", num_nodes=num_nodes, seed=0)


def graph_list(n: int = 120, seed: int = 0, f: int = 5, classes: int = 3) -> list:
    """``n`` small random undirected graphs with features and one label each."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        k = int(torch.randint(3, 10, (1,), generator=gen))
        src = torch.randint(0, k, (2 * k,), generator=gen)
        dst = torch.randint(0, k, (2 * k,), generator=gen)
        out.append(Data(x=torch.randn(k, f, generator=gen),
                        edge_index=torch.stack([torch.cat([src, dst]), torch.cat([dst, src])]),
                        y=torch.tensor([i % classes])))
    return out


class EdgeNet(nn.Module):
    """A Linear encoder, one sum-aggregating SAGE layer and a head: a user's model under the
    edge unit (one message-passing layer: each edge in at most 2 subgraphs)."""

    def __init__(self, f: int, c: int, h: int = 16):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.lin, self.conv, self.head = nn.Linear(f, h), SAGEConv(h, h, aggr="sum"), \
            nn.Linear(h, c)

    def forward(self, x, edge_index):
        return self.head(torch.relu(self.conv(torch.relu(self.lin(x)), edge_index)))


class Sage(nn.Module):
    """One SAGE layer, a LayerNorm and a head: a user's node classifier."""

    def __init__(self, f: int, c: int, h: int = 16):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.c1, self.norm, self.head = SAGEConv(f, h), nn.LayerNorm(h), nn.Linear(h, c)

    def forward(self, x, edge_index):
        return self.head(self.norm(torch.relu(self.c1(x, edge_index))))


class GraphNet(nn.Module):
    """A user's graph classifier: GCN, mean pooling per graph, a head."""

    def __init__(self, f: int, c: int, h: int = 8):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv, self.head = GCNConv(f, h), nn.Linear(h, c)

    def forward(self, x, edge_index, batch):
        from torch_geometric.nn import global_mean_pool

        return self.head(global_mean_pool(torch.tanh(self.conv(x, edge_index)), batch))


def node_loop(pt, model, opt) -> None:
    for batch in pt.loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)
        F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
        opt.step()


def graph_loop(pt, model, opt) -> None:
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y).backward()
        opt.step()


def published(pt, model) -> dict:
    """What a user's loop publishes: the epsilon, ``pt.privacy``, the ledger, a
    checkpoint and the model's weights."""
    return {"epsilon": pt.epsilon, "delta": pt.delta, "privacy": pt.privacy,
            "ledger": pt.ledger, "checkpoint": pt.state_dict(), "model": model.state_dict()}


def user_node_train(sampler="heterpoisson", *, seed: int = 0, steps: int = 20,
                    sharded: bool = False, loop=node_loop, model_class=None):
    """``train(data)`` of a user's loop on ``make_private`` (on a one-part partition of
    ``data`` through ``make_private_sharded`` when ``sharded``); ``sampler``: a name, or a
    callable making a fresh sampler for each run."""
    def train(data):
        n_train = int(data.train_mask.sum())
        torch.manual_seed(seed)
        model = (model_class or Sage)(data.num_features, int(data.y.max()) + 1)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        if sharded:
            from gnnprivacy.training.sharded import make_private_sharded as make
            source = _one_part(data)
        else:
            make, source = gp.make_private, data
        pt = make(model, opt, source, sampler=sampler if isinstance(sampler, str) else sampler(),
                  epsilon=4.0, seed=seed, steps=steps,
                  batch_size=max(1, round(0.2 * n_train)))
        loop(pt, model, opt)
        pt.close()
        return published(pt, model)

    return train


def user_graph_train(*, seed: int = 0, steps: int = 30, loop=graph_loop,
                     sharded: bool = False):
    """``train(graphs)`` of a user's loop on ``make_private(sampler="graphs")`` (on a
    one-part partition of the graphs through ``make_private_sharded`` when ``sharded``)."""
    def train(graphs):
        torch.manual_seed(seed)
        model = GraphNet(graphs[0].num_features, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if sharded:
            from gnnprivacy.training.sharded import make_private_sharded as make
            source = _one_graph_part(graphs)
        else:
            make, source = gp.make_private, graphs
        pt = make(model, opt, source, sampler="graphs", epsilon=2.0, batch_size=24,
                  steps=steps, seed=seed)
        loop(pt, model, opt)
        pt.close()
        return published(pt, model)

    return train


def graph_method_train(*, seed: int = 0):
    """``train(graphs)`` of ``dpsgd-graph``'s training (the method's own call)."""
    from gnnprivacy.training.graph_classification import fit_graph_classifier

    def train(graphs):
        fit = fit_graph_classifier(graphs, num_features=5, num_classes=3, epsilon=4.0,
                                   epochs=4, batch_size=24, seed=seed)
        return {"epsilon": fit.epsilon, "delta": fit.delta, "privacy": fit.privacy,
                "ledger": fit.ledger, "model": fit.model.state_dict()}

    return train


def sharded_trainer_train(*, seed: int = 0):
    """``train(data)`` of ``gnnprivacy train-sharded`` on a one-part partition of ``data``,
    publishing its record and files."""
    from gnnprivacy.auditing.code import published_outputs
    from gnnprivacy.method.sharded import run_sharded

    def train(data):
        shards = _one_part(data)
        with tempfile.TemporaryDirectory() as folder:
            record = run_sharded({"seed": seed, "runs_dir": folder, "epsilon": 4.0,
                                  "steps": 20, "q_b": 0.2}, shards, run_id="audit")
            out = published_outputs({"record": record.to_dict()}, folder, shards)
        return {"epsilon": record.epsilon, "delta": record.delta, **out}

    return train


def sharded_graph_trainer_train(*, seed: int = 0):
    """``train(graphs)`` of ``gnnprivacy train-sharded`` on a one-part partition of graphs
    (``dpsgd-graph`` over graph shards), publishing its record and files."""
    from gnnprivacy.auditing.code import published_outputs
    from gnnprivacy.method.sharded import run_sharded

    def train(graphs):
        shards = _one_graph_part(graphs)
        with tempfile.TemporaryDirectory() as folder:
            record = run_sharded({"seed": seed, "runs_dir": folder, "epsilon": 4.0,
                                  "epochs": 4, "batch_size": 24, "hidden": 16}, shards,
                                 run_id="audit")
            out = published_outputs({"record": record.to_dict()}, folder, shards)
        return {"epsilon": record.epsilon, "delta": record.delta, **out}

    return train


def _one_graph_part(graphs) -> str:
    from gnnprivacy.datasets.graph_shards import partition_graph_list

    folder = tempfile.mkdtemp(prefix="gp-audit-graph-shards-")
    return str(partition_graph_list(graphs, f"{folder}/p", num_parts=1))


def _one_part(data) -> str:
    from gnnprivacy.datasets.shards import partition_graph

    folder = tempfile.mkdtemp(prefix="gp-audit-shards-")
    partition_graph(data, f"{folder}/p", num_parts=1)
    return f"{folder}/p"


def path_train(path: str, seed: int = 0):
    """``(train(data), data, audit options)`` of a path that is not a registered method."""
    kind, _, name = path.partition(":")
    small = {"num_canaries": 64, "num_noise": 64}
    if kind == "make_private" and name == "graphs":
        return user_graph_train(seed=seed), graph_list(), small
    if kind == "make_private" and name == "edges":
        from gnnprivacy.training.private.edge_sampler import EdgeSubgraphs

        return user_node_train(lambda: EdgeSubgraphs(inference="none"), seed=seed,
                               model_class=EdgeNet), node_data(), {}
    if kind == "make_private":
        return user_node_train(name, seed=seed), node_data(), {}
    if kind == "graph-method":
        return graph_method_train(seed=seed), graph_list(), small
    if kind == "sharded" and name == "trainer":
        return sharded_trainer_train(seed=seed), node_data(), {}
    if kind == "sharded" and name == "graph-trainer":
        return sharded_graph_trainer_train(seed=seed), graph_list(), small
    if kind == "sharded" and name == "graphs":
        return user_graph_train(seed=seed, sharded=True), graph_list(), small
    if kind == "sharded" and name == "edges":
        return user_node_train(name, seed=seed, sharded=True, model_class=EdgeNet), \
            node_data(), {}
    if kind == "sharded":
        return user_node_train(name, seed=seed, sharded=True), node_data(), {}
    raise KeyError(path)


def audit(path: str, seed: int = 0, **kw):
    """The code audit of one shipped path (see `PATHS`), publication check included."""
    kind, _, name = path.partition(":")
    if kind == "method":
        return audit_method_code(name, "graph", {"epsilon": 4.0, "seed": seed,
                                                 **ENGINE_METHODS[name]}, data=node_data(),
                                 seed=seed, **kw)
    train, data, options = path_train(path, seed)
    return code_audit(train, data=data, seed=seed, **{**options, **kw})


#: every shipped path that trains through the engine
PATHS = ([f"method:{m}" for m in ENGINE_METHODS] + ["graph-method:dpsgd-graph"]
         + [f"make_private:{s}" for s in ("heterpoisson", "degree_bounded", "nodes", "graphs",
                                           "edges")]
         + ["sharded:trainer", "sharded:graph-trainer"]
         + [f"sharded:{s}" for s in ("heterpoisson", "nodes", "degree_bounded", "graphs",
                                     "edges")])


def _all_checks(result):
    for i, checks in enumerate(result.details["checks"]):
        for name, c in checks.items():
            yield f"engine {i}: {name}", name, c
    if result.details.get("publication") is not None:
        yield "publication", "publication", result.details["publication"]


def failed(result) -> set[str]:
    """The names of the checks that were made and failed."""
    return {name for _, name, c in _all_checks(result) if c.get("checked") and not c["passed"]}


def unchecked(result) -> list[str]:
    """Every check that could not be made, with why."""
    return [f"{where} ({c.get('why')})" for where, _, c in _all_checks(result)
            if not c.get("checked")]
