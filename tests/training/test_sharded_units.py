"""Every privacy unit over ranks equals one process (issue 47): graph classification over
graph shards (``sampler="graphs"``); a sharded run after 20 steps is within 1e-5 (relative) of
the single-process run with the counter stream, with identical ledgers and epsilon. Broken
controls: the noise drawn on every rank, and a graph sampled on two ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch_geometric.data import Data

from gnnprivacy.datasets.graph_shards import open_graph_shard, partition_graph_list
from gnnprivacy.training.distributed import spawn_local
from gnnprivacy.training.graph_classification import GraphClassifier
from gnnprivacy.training.private import make_private
from gnnprivacy.training.private.graph_sampler import GraphSampler
from gnnprivacy.training.sharded import make_private_sharded

STEPS = 20
GKW = dict(noise_multiplier=1.0, steps=STEPS, batch_size=16, seed=3, max_grad_norm=0.5)


def _graphs(n: int = 120, seed: int = 0) -> list[Data]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        k = int(torch.randint(3, 9, (1,), generator=gen))
        src = torch.randint(0, k, (2 * k,), generator=gen)
        dst = torch.randint(0, k, (2 * k,), generator=gen)
        out.append(Data(x=torch.randn(k, 6, generator=gen) + (i % 2),
                        edge_index=torch.stack([torch.cat([src, dst]), torch.cat([dst, src])]),
                        y=torch.tensor([i % 2])))
    return out


def _rel(a: dict, b: dict) -> float:
    num = sum(float((a[k] - b[k]).norm() ** 2) for k in b)
    return (num / sum(float(b[k].norm() ** 2) for k in b)) ** 0.5


def _graph_run(data, sampler, make, *, broken: str | None = None, dup=None,
               steps: int = STEPS) -> dict:
    torch.manual_seed(0)
    model = GraphClassifier(6, 2, backbone="gin", hidden=16, layers=2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = make(model, opt, data, sampler=sampler, **{**GKW, "steps": steps})
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    if broken == "noise":                       # every rank draws (the same) noise
        pt.engine.noise_rank = rank
    if broken == "twice" and rank == 1:         # rank 1 also holds (and samples) graph `dup`
        _add_graph(pt.sampler, *dup)
    seen = [[] for _ in range(steps)]          # a step whose local sample is empty yields none
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y).backward()
        seen[pt.steps] = sorted(batch.g_id.tolist())
        opt.step()
    return {"params": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "ledger": pt.ledger, "epsilon": pt.epsilon, "steps": pt.steps, "seen": seen,
            "stream_seed": (pt.sampler.stream_state() or (None,))[0]}


def _add_graph(sampler, key: int, graph: Data) -> None:
    """Give ``sampler`` one more training graph, keyed ``key`` (the broken control)."""
    start = sampler._x.shape[0]
    estart = sampler._ei.shape[1]
    sampler._x = torch.cat([sampler._x, graph.x])
    sampler._ei = torch.cat([sampler._ei, graph.edge_index], 1)
    pos = int(torch.searchsorted(sampler.train_nodes, torch.tensor(key)))
    for name, value in (("train_nodes", key), ("_ptr", start), ("_eptr", estart),
                        ("_sizes", graph.num_nodes), ("_esizes", graph.edge_index.shape[1]),
                        ("_y", int(graph.y))):
        t = getattr(sampler, name)
        setattr(sampler, name, torch.cat([t[:pos], torch.tensor([value], dtype=t.dtype),
                                          t[pos:]]))


def _graph_worker(rank, world, folder, out, broken, dup):
    torch.set_num_threads(1)
    torch.save(_graph_run(folder, "graphs", make_private_sharded, broken=broken, dup=dup),
               f"{out}/graph{rank}.pt")


def test_one_part_of_graph_shards_is_the_single_process_run(tmp_path):
    """Without a process group: one part, the counter stream, the same batches and result."""
    graphs = _graphs(40)
    folder = partition_graph_list(graphs, tmp_path / "g", num_parts=1)
    single = _graph_run(graphs, GraphSampler(sampling_stream="counter"), make_private, steps=5)
    sharded = _graph_run(str(folder), "graphs", make_private_sharded, steps=5)
    assert sharded["seen"] == single["seen"] and sharded["ledger"] == single["ledger"]
    assert _rel(sharded["params"], single["params"]) < 1e-6
    # control: the generator stream draws other graphs
    other = _graph_run(graphs, GraphSampler(), make_private, steps=5)
    assert other["seen"] != single["seen"]
    # the keyed sample is the Poisson sample of rate q = 16 / 40: graph g is drawn at step t
    # exactly when its key (seed, t, g) is below q
    from gnnprivacy.sampling.counter_rng import CounterRandom

    ids = torch.arange(40)
    for t, drawn in enumerate(single["seen"]):
        keyed = CounterRandom(single["stream_seed"], t).uniform(1, ids) < 16 / 40
        assert drawn == ids[keyed].tolist()


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_graph_shards_equal_one_process_and_two_broken_controls(tmp_path, world):
    graphs = _graphs()
    train = [i for i in range(len(graphs)) if i % 5]           # 96 training graphs
    folder = partition_graph_list(graphs, tmp_path / "g", num_parts=world,
                                  train=train, test=[i for i in range(120) if not i % 5])
    assert open_graph_shard(folder, 0).num_train == len(train)
    train_list = [graphs[i] for i in train]                    # what one process trains on
    single = _graph_run(train_list, GraphSampler(sampling_stream="counter"), make_private)
    spawn_local(_graph_worker, world, str(folder), str(tmp_path), None, None,
                start_method="fork")
    ranks = [torch.load(tmp_path / f"graph{r}.pt") for r in range(world)]
    assert single["steps"] == STEPS and all(r["steps"] == STEPS for r in ranks)
    # the ranks' graphs are the single process's sample, each graph on one rank
    for t in range(STEPS):
        union = sorted(g for r in ranks for g in r["seen"][t])
        assert union == single["seen"][t]
    assert sum(len(s) for s in single["seen"]) > 0
    assert all(torch.equal(ranks[0]["params"][k], r["params"][k]) for r in ranks
               for k in single["params"])
    assert _rel(ranks[0]["params"], single["params"]) < 1e-5
    assert all(r["ledger"] == single["ledger"] for r in ranks)
    assert all(r["epsilon"] == single["epsilon"] > 0 for r in ranks)
    if world == 3:
        return
    # broken control 1: the noise drawn on every rank
    spawn_local(_graph_worker, world, str(folder), str(tmp_path), "noise", None,
                start_method="fork")
    assert _rel(torch.load(tmp_path / "graph0.pt")["params"], single["params"]) > 1e-3
    # broken control 2: a sampled graph of part 0 also held (and so sampled) by rank 1
    shard0 = open_graph_shard(folder, 0)
    drawn = [g for s in single["seen"] for g in s]
    key = max(set(shard0.train_index().tolist()) & set(drawn), key=drawn.count)
    dup = (key, train_list[key])
    spawn_local(_graph_worker, world, str(folder), str(tmp_path), "twice", dup,
                start_method="fork")
    twice = [torch.load(tmp_path / f"graph{r}.pt") for r in range(world)]
    assert any(key in s for s in twice[1]["seen"])
    assert _rel(twice[0]["params"], single["params"]) > 1e-5     # fails the acceptance


@pytest.mark.slow
def test_train_sharded_on_graph_shards_is_fit_graph_classifier_in_one_process(tmp_path):
    """``gnnprivacy train-sharded`` on graph shards (one part, no torchrun) trains
    ``dpsgd-graph`` exactly as ``fit_graph_classifier`` with the counter stream on the
    training list: the same parameters' accuracy, ledger and epsilon; it scores the shards'
    test graphs."""
    import json
    import os

    from click.testing import CliRunner

    from gnnprivacy.cli import main
    from gnnprivacy.method.context import RunContext
    from gnnprivacy.training.graph_classification import accuracy, fit_graph_classifier

    graphs = _graphs(80)
    train = [i for i in range(80) if i % 4]
    test = [i for i in range(80) if not i % 4]
    folder = partition_graph_list(graphs, tmp_path / "g", num_parts=1, train=train, test=test)
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    args = ["--epochs", "2", "--batch-size", "8", "--hidden", "8", "--seed", "4"]
    done = CliRunner(env=env).invoke(main, ["train-sharded", str(folder), *args,
                                            "--runs-dir", str(tmp_path / "runs")])
    assert done.exit_code == 0, done.output
    assert "dpsgd-graph on" in done.stdout and "(20 test graphs)" in done.stdout
    (path,) = (tmp_path / "runs").glob("*.json")
    record = json.loads(path.read_text())
    assert record["method"] == "dpsgd-graph" and record["privacy"]["unit"] == "graph"
    assert record["privacy"]["sampling_stream"] == "counter"

    def counter(model, opt, data, sampler, **kw):
        return make_private(model, opt, data, sampler=GraphSampler(sampling_stream="counter"),
                            **kw)

    seed = RunContext(config=None, params=None, data=None, seed=4).seed_for("train")
    fit = fit_graph_classifier([graphs[i] for i in train], num_features=6, num_classes=2,
                               epochs=2, batch_size=8, hidden=8, seed=seed, epsilon=8.0,
                               make=counter)
    assert record["privacy"]["ledger"] == json.loads(json.dumps(fit.ledger))
    assert record["epsilon"] == fit.epsilon
    assert record["metrics"]["test_accuracy"] == pytest.approx(
        accuracy(fit.model, [graphs[i] for i in test]), abs=1e-6)
    # refused: an option of the node trainer, and --resume (dpsgd-graph writes no checkpoint)
    for bad, name in ((["--q-b", "0.1"], "q_b"), (["--resume"], "resume")):
        out = CliRunner(env=env).invoke(main, ["train-sharded", str(folder), *bad,
                                               "--runs-dir", str(tmp_path / "r2")])
        assert out.exit_code == 1 and name in out.output and "Traceback" not in out.output


# -------------------------------------------------------------------- degree_bounded (DP-GNN)
BKW = dict(noise_multiplier=1.0, steps=STEPS, batch_size=30, seed=3)


class TwoHops(torch.nn.Module):
    """Two GCN layers: 2-hop subgraphs, bounded over every node (bound_all_nodes)."""

    def __init__(self):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.c1, self.c2 = GCNConv(12, 16), GCNConv(16, 4)

    def forward(self, x, edge_index):
        return self.c2(torch.relu(self.c1(x, edge_index)), edge_index)


def _node_data():
    from gnnprivacy.datasets import load_dataset

    return load_dataset("csbm", num_nodes=400, num_features=12, seed=0)


def _bounded_run(data, sampler, make, *, broken: str | None = None, steps: int = STEPS) -> dict:
    torch.manual_seed(0)
    model = TwoHops()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = make(model, opt, data, sampler=sampler, **{**BKW, "steps": steps})
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    if broken == "noise":
        pt.engine.noise_rank = rank
    subgraphs = [[] for _ in range(steps)]
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                        batch.y[batch.center]).backward()
        step = pt.steps
        opt.step()                      # the loop guard: read the batch after the step
        subgraphs[step] = sorted(
            (int(batch.n_id[c]), tuple(sorted(batch.n_id[batch.batch == i].tolist())))
            for i, c in enumerate(batch.center.tolist()))
    table = getattr(pt.sampler, "_table", None)
    if table is None:
        bounded = pt.sampler._bounded.edge_index
    else:                                   # this rank's nodes' bounded neighbours
        nodes = torch.from_numpy(np.array(pt.sampler._shard.nodes, dtype=np.int64))
        t = torch.from_numpy(table)
        rows = nodes.repeat_interleave((t >= 0).sum(1))
        bounded = torch.stack([t[t >= 0], rows])
    return {"params": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "ledger": pt.ledger, "epsilon": pt.epsilon, "steps": pt.steps,
            "subgraphs": subgraphs, "bounded": bounded,
            "occurrence_bound": pt.privacy["occurrence_bound"]}


def _edges(ei) -> set:
    return set(map(tuple, ei.t().tolist()))


def test_one_part_of_node_shards_is_the_single_process_degree_bounded_run(tmp_path):
    from gnnprivacy.datasets.shards import partition_graph
    from gnnprivacy.training.private.samplers import DegreeBoundedSubgraphs
    from gnnprivacy.training.sharded_bounded import ShardedDegreeBoundedSubgraphs

    data = _node_data()
    folder = partition_graph(data, tmp_path / "one", num_parts=1)
    single = _bounded_run(data, DegreeBoundedSubgraphs(max_degree=3, sampling_stream="counter"),
                          make_private, steps=5)
    sharded = _bounded_run(str(folder), ShardedDegreeBoundedSubgraphs(max_degree=3),
                           make_private_sharded, steps=5)
    assert _edges(sharded["bounded"]) == _edges(single["bounded"])
    assert sharded["subgraphs"] == single["subgraphs"]
    assert sharded["ledger"] == single["ledger"] and sharded["occurrence_bound"] == 10
    assert all(len(step) == BKW["batch_size"] for step in single["subgraphs"])   # m centres
    assert _rel(sharded["params"], single["params"]) < 1e-6
    # control: the generator stream bounds and samples otherwise
    other = _bounded_run(data, DegreeBoundedSubgraphs(max_degree=3), make_private, steps=5)
    assert other["subgraphs"] != single["subgraphs"]


def _bounded_worker(rank, world, folder, out, broken):
    from gnnprivacy.training.sharded_bounded import ShardedDegreeBoundedSubgraphs

    torch.set_num_threads(1)
    if broken == "alone":              # each rank bounds its part alone: no edge to another
        from gnnprivacy.sampling.bounded_rounds import PartRounds

        init = PartRounds.__init__

        def without_cross_edges(self, *args, **kwargs):
            init(self, *args, **kwargs)
            self.status[self.local_nbr < 0] = 2        # rejected, never proposed

        PartRounds.__init__ = without_cross_edges
    torch.save(_bounded_run(folder, ShardedDegreeBoundedSubgraphs(max_degree=3),
                            make_private_sharded, broken=broken), f"{out}/bounded{rank}.pt")


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_degree_bounded_shards_equal_one_process_and_broken_controls(tmp_path, world):
    """The bounding (its edges), the 2-hop subgraphs that cross parts (every step's centres
    and members), the occurrence bound, the parameters after 20 steps, the ledger and
    epsilon: each equal to one process."""
    from gnnprivacy.datasets.shards import partition_graph
    from gnnprivacy.training.private.samplers import DegreeBoundedSubgraphs

    data = _node_data()
    folder = partition_graph(data, tmp_path / "s", num_parts=world, method="metis")
    single = _bounded_run(data, DegreeBoundedSubgraphs(max_degree=3, sampling_stream="counter"),
                          make_private)
    spawn_local(_bounded_worker, world, str(folder), str(tmp_path), None, start_method="fork")
    ranks = [torch.load(tmp_path / f"bounded{r}.pt") for r in range(world)]
    union = set().union(*(_edges(r["bounded"]) for r in ranks))
    assert union == _edges(single["bounded"]) and len(union) > 100
    crossing = 0
    owner = np.load(folder / "owner.npy")
    for t in range(STEPS):
        steps = sorted(s for r in ranks for s in r["subgraphs"][t])
        assert steps == single["subgraphs"][t]
        crossing += sum(len(set(owner[list(m)])) > 1 for _, m in steps)
    assert crossing > 0                              # some subgraphs span two parts
    assert all(r["occurrence_bound"] == single["occurrence_bound"] == 10 for r in ranks)
    assert _rel(ranks[0]["params"], single["params"]) < 1e-5
    assert all(r["ledger"] == single["ledger"] and r["epsilon"] == single["epsilon"]
               for r in ranks)
    if world == 3:
        return
    for broken, threshold in (("noise", 1e-3), ("alone", 1e-5)):
        spawn_local(_bounded_worker, world, str(folder), str(tmp_path), broken,
                    start_method="fork")
        got = [torch.load(tmp_path / f"bounded{r}.pt") for r in range(world)]
        assert _rel(got[0]["params"], single["params"]) > threshold, broken
        if broken == "alone":          # the bounded graph itself differs
            assert set().union(*(_edges(r["bounded"]) for r in got)) != union


def test_degree_bounded_refuses_the_partition_of_a_directed_graph(tmp_path):
    from gnnprivacy.datasets.shards import open_shard, partition_graph
    from gnnprivacy.errors import InvalidParameterError
    from gnnprivacy.training.sharded_bounded import ShardedDegreeBoundedSubgraphs

    data = _node_data()
    directed = data.clone()
    directed.edge_index = data.edge_index[:, data.edge_index[0] < data.edge_index[1]]
    folder = partition_graph(directed, tmp_path / "d", num_parts=1)
    assert open_shard(folder, 0).meta["symmetric"] is False
    assert open_shard(partition_graph(data, tmp_path / "u", num_parts=1), 0).meta["symmetric"]
    model = TwoHops()
    with pytest.raises(InvalidParameterError, match="undirected graph"):
        make_private_sharded(model, torch.optim.Adam(model.parameters()), str(folder),
                             sampler=ShardedDegreeBoundedSubgraphs(max_degree=3), **BKW)
    with pytest.raises(InvalidParameterError, match="shards of graphs"):   # node shards wanted
        make_private_sharded(model, torch.optim.Adam(model.parameters()), str(folder),
                             sampler="graphs", **BKW)
