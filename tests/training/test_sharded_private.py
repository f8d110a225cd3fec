"""`make_private_sharded` (gloo, 2 local processes) equals the single-process `make_private`
run with the counter sampling stream: parameters, ledgers, epsilon; a broken control that
draws the noise on every rank does not."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from torch_geometric.nn import GCNConv

from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.shards import open_shard, partition_graph
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.distributed import spawn_local
from gnnprivacy.training.private import HeterPoissonSubgraphs, NodeSubgraphs, make_private
from gnnprivacy.training.sharded import (ShardedHeterPoissonSubgraphs, ShardedNodeSubgraphs,
                                         make_private_sharded)

KW = dict(noise_multiplier=1.0, steps=6, batch_size=40, seed=3, max_grad_norm=0.5)


class Net(torch.nn.Module):
    def __init__(self, f: int, c: int):
        super().__init__()
        self.conv = GCNConv(f, 16)
        self.out = torch.nn.Linear(16, c)

    def forward(self, x, edge_index):
        return self.out(torch.relu(self.conv(x, edge_index)))


def _data():
    return load_dataset("csbm", num_nodes=400, num_features=12, seed=0)


def _train(data_or_shards, sampler, *, sharded: bool, broken: bool = False) -> dict:
    torch.manual_seed(0 if not sharded else 100 + torch.distributed.get_rank())
    model = Net(12, 4)
    if not sharded:
        torch.manual_seed(0)
        model = Net(12, 4)
    elif torch.distributed.get_rank() == 0:    # rank 0's initial model = the single run's
        torch.manual_seed(0)
        model = Net(12, 4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    make = make_private_sharded if sharded else make_private
    pt = make(model, opt, data_or_shards, sampler=sampler, **KW)
    if broken:                                  # every rank draws (the same) noise
        pt.engine.noise_rank = torch.distributed.get_rank()
    subgraphs = 0
    for batch in pt.loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)
        F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
        opt.step()
        subgraphs += int(batch.num_subgraphs)
    return {"params": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "ledger": pt.ledger, "epsilon": pt.epsilon, "steps": pt.steps,
            "subgraphs": subgraphs,
            "exchange": dict(getattr(pt.sampler, "exchange_", {}))}


def _worker(rank: int, world: int, folder: str, out: str, name: str, broken: bool) -> None:
    torch.set_num_threads(1)
    result = _train(folder, name, sharded=True, broken=broken)
    torch.save(result, f"{out}/rank{rank}.pt")


def _rel(a: dict, b: dict) -> float:
    num = sum(float((a[k] - b[k]).norm() ** 2) for k in b) ** 0.5
    return num / sum(float(b[k].norm() ** 2) for k in b) ** 0.5


REFERENCE = {"heterpoisson": lambda: HeterPoissonSubgraphs(sampling_stream="counter"),
             "nodes": lambda: NodeSubgraphs(sampling_stream="counter")}


@pytest.mark.parametrize("name", ["heterpoisson", "nodes"])
def test_two_ranks_equal_the_single_process_make_private(tmp_path, name):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="metis")
    spawn_local(_worker, 2, str(folder), str(tmp_path), name, False, start_method="fork")
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = _train(data, REFERENCE[name](), sharded=False)
    assert single["steps"] == KW["steps"] and ranks[0]["steps"] == KW["steps"]
    assert all(torch.equal(ranks[0]["params"][k], ranks[1]["params"][k])
               for k in single["params"])
    assert _rel(ranks[0]["params"], single["params"]) < 1e-5
    assert ranks[0]["ledger"] == ranks[1]["ledger"] == single["ledger"]
    assert ranks[0]["epsilon"] == ranks[1]["epsilon"] == single["epsilon"] > 0
    # the ranks' subgraphs partition the global sample's
    assert ranks[0]["subgraphs"] + ranks[1]["subgraphs"] == single["subgraphs"] > 0
    if name == "heterpoisson":                    # remote features were fetched
        assert ranks[0]["exchange"]["remote_rows"] + ranks[1]["exchange"]["remote_rows"] > 0
    # broken control: the noise drawn on every rank is no longer the single run's release
    spawn_local(_worker, 2, str(folder), str(tmp_path), name, True, start_method="fork")
    broken = torch.load(tmp_path / "rank0.pt")
    assert broken["ledger"] == single["ledger"]
    assert _rel(broken["params"], single["params"]) > 1e-3


def test_the_generator_stream_is_another_sample(tmp_path):
    """Control for the reference: the default stream gives other batches (so the equality
    above rests on the counter stream)."""
    data = _data()
    counter = _train(data, REFERENCE["heterpoisson"](), sharded=False)
    default = _train(data, HeterPoissonSubgraphs(), sharded=False)
    assert _rel(default["params"], counter["params"]) > 1e-3


def test_one_rank_and_refusals(tmp_path):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="contiguous")
    model = Net(12, 4)
    opt = torch.optim.Adam(model.parameters())
    with pytest.raises(InvalidParameterError, match="shards"):
        make_private_sharded(model, opt, folder, sampler="nodes", **KW)   # 2 parts, 1 rank
    one = partition_graph(data, tmp_path / "one", num_parts=1, method="contiguous")
    with pytest.raises(InvalidParameterError, match="sampler"):
        make_private_sharded(model, opt, one, sampler="no-such-sampler", **KW)
    with pytest.raises(InvalidParameterError, match="shards of graphs"):
        make_private_sharded(model, opt, one, sampler="graphs", **KW)    # node shards
    with pytest.raises(InvalidParameterError, match="sampling_stream"):
        ShardedHeterPoissonSubgraphs(sampling_stream="generator")
    with pytest.raises(InvalidParameterError, match="sampling_stream"):
        ShardedNodeSubgraphs(sampling_stream="generator")
    with pytest.raises(InvalidParameterError, match="sampling_stream"):
        NodeSubgraphs(sampling_stream="other")
    pt = make_private_sharded(model, opt, open_shard(one, 0),
                              sampler=ShardedHeterPoissonSubgraphs(M=2.0), **KW)
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                        batch.y[batch.center]).backward()
        opt.step()
    assert pt.steps == KW["steps"] and pt.epsilon > 0


def _run(pt, model, opt, stop: int | None = None) -> None:
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                        batch.y[batch.center]).backward()
        opt.step()
        if stop is not None and pt.steps == stop:
            break


@pytest.mark.parametrize("keep_stream", [True, False])
def test_a_counter_stream_run_resumes_to_the_uninterrupted_run(keep_stream):
    """The counter stream's seed and step travel in ``pt.state_dict()``; without them (the
    broken control) the resumed run draws another seed and other batches."""
    data = _data()

    def fresh():
        torch.manual_seed(0)
        model = Net(12, 4)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        return make_private(model, opt, data, sampler=REFERENCE["heterpoisson"](), **KW), \
            model, opt

    pt, model, opt = fresh()
    _run(pt, model, opt)
    whole = {k: v.clone() for k, v in model.state_dict().items()}
    pt, model, opt = fresh()
    _run(pt, model, opt, stop=3)
    state = pt.state_dict()
    assert state["sampling_stream"][1] == 3
    if not keep_stream:
        state.pop("sampling_stream")
    pt2, model2, opt2 = fresh()
    pt2.load_state_dict(state)
    _run(pt2, model2, opt2)
    assert pt2.steps == KW["steps"]
    assert (_rel(model2.state_dict(), whole) < 1e-6) == keep_stream


def _secure_worker(rank: int, world: int, folder: str, out: str, broadcast: bool) -> None:
    torch.set_num_threads(1)
    if not broadcast:                  # broken control: each rank keeps its own OS seed
        from gnnprivacy.sampling.counter_rng import counter_seed

        ShardedHeterPoissonSubgraphs._stream_seed = lambda self, gen: counter_seed(gen)
    model = Net(12, 4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    kw = {**KW, "seed": None, "secure_mode": True}
    pt = make_private_sharded(model, opt, folder, sampler="heterpoisson", **kw)
    _run(pt, model, opt)
    torch.save({"stream": pt.sampler.stream_state(), "params": model.state_dict(),
                "ledger": pt.ledger}, f"{out}/secure{rank}.pt")


@pytest.mark.parametrize("broadcast", [True, False])
def test_secure_mode_ranks_share_rank_0s_stream(tmp_path, broadcast):
    folder = partition_graph(_data(), tmp_path / "s", num_parts=2, method="metis")
    spawn_local(_secure_worker, 2, str(folder), str(tmp_path), broadcast, start_method="fork")
    a, b = (torch.load(tmp_path / f"secure{r}.pt") for r in range(2))
    assert (a["stream"] == b["stream"]) == broadcast
    assert a["ledger"] == b["ledger"]
    assert all(torch.equal(a["params"][k], b["params"][k]) for k in a["params"])


def test_the_sharded_loader_batch(tmp_path):
    """One rank over a one-part partition: the batch's centre labels and features are the
    graph's, and the sampler's repr shows options, not the shard's arrays."""
    data = _data()
    one = partition_graph(data, tmp_path / "one", num_parts=1, method="contiguous")
    model = Net(12, 4)
    opt = torch.optim.Adam(model.parameters())
    pt = make_private_sharded(model, opt, one, sampler="heterpoisson", **KW)
    batch = next(iter(pt.loader))
    assert batch.num_subgraphs > 0 and batch.edge_index.numel() > 0
    assert torch.equal(batch.x, data.x[batch.n_id])
    assert torch.equal(batch.y[batch.center], data.y[batch.n_id[batch.center]])
    assert "memmap" not in repr(pt.sampler) and "M=1.0" in repr(pt.sampler)
    pt.guard.stop()
