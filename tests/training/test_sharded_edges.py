"""Edge-level DP over shards equals one process (issue 47 item 3): ``make_private_sharded(
sampler="edges")`` after 20 steps is within 1e-5 (relative) of ``make_private`` with
``EdgeSubgraphs(sampling_stream="counter")``, every step's stars are the single process's
(some with neighbours on another part), and the ledgers and epsilon are identical. Broken
controls: the noise drawn on every rank, and each rank reading only the neighbours it owns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch_geometric.nn import SAGEConv

from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.shards import partition_graph
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.distributed import spawn_local
from gnnprivacy.training.private import make_private
from gnnprivacy.training.private.edge_sampler import EdgeSubgraphs
from gnnprivacy.training.sharded import make_private_sharded
from gnnprivacy.training.sharded_edges import ShardedEdgeSubgraphs

STEPS = 20
EKW = dict(noise_multiplier=1.0, steps=STEPS, batch_size=40, seed=3, max_grad_norm=0.5)


class OneHop(torch.nn.Module):
    """A Linear encoder, one sum-aggregating SAGE layer and a head (K = 1)."""

    def __init__(self):
        super().__init__()
        self.lin, self.conv, self.head = (torch.nn.Linear(12, 16), SAGEConv(16, 16, aggr="sum"),
                                          torch.nn.Linear(16, 4))

    def forward(self, x, edge_index):
        return self.head(torch.relu(self.conv(torch.relu(self.lin(x)), edge_index)))


def _data():
    return load_dataset("csbm", num_nodes=400, num_features=12, seed=0)


def _rel(a: dict, b: dict) -> float:
    num = sum(float((a[k] - b[k]).norm() ** 2) for k in b)
    return (num / sum(float(b[k].norm() ** 2) for k in b)) ** 0.5


def _run(data, sampler, make, *, broken: str | None = None, steps: int = STEPS) -> dict:
    torch.manual_seed(0)
    model = OneHop()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = make(model, opt, data, sampler=sampler, **{**EKW, "steps": steps})
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    if broken == "noise":                         # every rank draws (the same) noise
        pt.engine.noise_rank = rank
    stars = [[] for _ in range(steps)]
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                        batch.y[batch.center]).backward()
        step = pt.steps
        opt.step()                                # the loop guard: read the batch after
        src, dst = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
        stars[step] = sorted((int(batch.n_id[c]), tuple(sorted(src[dst == batch.n_id[c]]
                                                                .tolist())))
                             for c in batch.center.tolist())
    pt.close()
    return {"params": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "ledger": pt.ledger, "epsilon": pt.epsilon, "steps": pt.steps, "stars": stars,
            "privacy": pt.privacy}


def _worker(rank, world, folder, out, broken):
    torch.set_num_threads(1)
    if broken == "own":                # each rank reads only the neighbours it owns
        from gnnprivacy.training import sharded_parts

        in_edges = sharded_parts._Part.in_edges

        def own_only(self, rows):
            src, sub = in_edges(self, rows)
            mine = self.lookup("owner", src).long() == rank
            return src[mine], sub[mine]

        sharded_parts._Part.in_edges = own_only
    torch.save(_run(folder, "edges", make_private_sharded, broken=broken),
               f"{out}/edges{rank}.pt")


def test_one_part_is_the_single_process_edge_level_run(tmp_path):
    data = _data()
    folder = partition_graph(data, tmp_path / "one", num_parts=1)
    single = _run(data, EdgeSubgraphs(sampling_stream="counter", inference="none"),
                  make_private, steps=5)
    sharded = _run(str(folder), "edges", make_private_sharded, steps=5)
    assert sharded["stars"] == single["stars"] and sharded["ledger"] == single["ledger"]
    assert sum(len(s) for s in single["stars"]) > 5 * 30           # about q N centres a step
    assert all(len(m) > 0 for s in single["stars"] for _, m in s)  # stars with neighbours
    assert _rel(sharded["params"], single["params"]) < 1e-6
    for key in ("unit", "occurrence_bound", "num_unit_edges", "edge_unit"):
        assert sharded["privacy"].get(key) == single["privacy"].get(key), key
    assert single["privacy"]["occurrence_bound"] == 2          # an undirected edge, one hop
    # control: the generator stream samples other centres
    other = _run(data, EdgeSubgraphs(inference="none"), make_private, steps=5)
    assert other["stars"] != single["stars"]


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_edge_shards_equal_one_process_and_broken_controls(tmp_path, world):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=world, method="metis")
    single = _run(data, EdgeSubgraphs(sampling_stream="counter", inference="none"),
                  make_private)
    spawn_local(_worker, world, str(folder), str(tmp_path), None, start_method="fork")
    ranks = [torch.load(tmp_path / f"edges{r}.pt") for r in range(world)]
    owner = np.load(folder / "owner.npy")
    crossing = 0
    for t in range(STEPS):
        union = sorted(s for r in ranks for s in r["stars"][t])
        assert union == single["stars"][t]
        crossing += sum(len(set(owner[[c, *m]])) > 1 for c, m in union)
    assert crossing > 0                               # stars with a neighbour on another part
    assert all(torch.equal(ranks[0]["params"][k], r["params"][k]) for r in ranks
               for k in single["params"])
    assert _rel(ranks[0]["params"], single["params"]) < 1e-5
    assert all(r["ledger"] == single["ledger"] and r["epsilon"] == single["epsilon"] > 0
               for r in ranks)
    if world == 3:
        return
    for broken, threshold in (("noise", 1e-3), ("own", 1e-5)):
        spawn_local(_worker, world, str(folder), str(tmp_path), broken, start_method="fork")
        got = torch.load(tmp_path / "edges0.pt")
        assert _rel(got["params"], single["params"]) > threshold, broken


def test_what_the_sharded_edge_path_refuses(tmp_path):
    data = _data()
    folder = partition_graph(data, tmp_path / "one", num_parts=1)

    class TwoHops(OneHop):
        def __init__(self):
            super().__init__()
            self.conv2 = SAGEConv(16, 16, aggr="sum")

        def forward(self, x, edge_index):
            h = torch.relu(self.conv(torch.relu(self.lin(x)), edge_index))
            return self.head(self.conv2(h, edge_index))

    opt_of = lambda m: torch.optim.Adam(m.parameters())             # noqa: E731
    with pytest.raises(InvalidParameterError, match="one message-passing layer"):
        m = TwoHops()
        make_private_sharded(m, opt_of(m), str(folder), sampler="edges", **EKW)
    with pytest.raises(InvalidParameterError, match="inference"):
        ShardedEdgeSubgraphs(inference="noisy")
    with pytest.raises(InvalidParameterError, match="sampling_stream"):
        ShardedEdgeSubgraphs(sampling_stream="generator")
    with pytest.raises(InvalidParameterError, match="max_in_degree"):
        ShardedEdgeSubgraphs(max_in_degree=5)
