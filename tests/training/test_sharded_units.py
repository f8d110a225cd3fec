"""Every privacy unit over ranks equals one process (issue 47): graph classification over
graph shards (``sampler="graphs"``); a sharded run after 20 steps is within 1e-5 (relative) of
the single-process run with the counter stream, with identical ledgers and epsilon. Broken
controls: the noise drawn on every rank, and a graph sampled on two ranks."""

from __future__ import annotations

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


def _graph_run(data, sampler, make, *, broken: str | None = None, dup=None) -> dict:
    torch.manual_seed(0)
    model = GraphClassifier(6, 2, backbone="gin", hidden=16, layers=2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = make(model, opt, data, sampler=sampler, **GKW)
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    if broken == "noise":                       # every rank draws (the same) noise
        pt.engine.noise_rank = rank
    if broken == "twice" and rank == 1:         # rank 1 also holds (and samples) graph `dup`
        _add_graph(pt.sampler, *dup)
    seen = [[] for _ in range(STEPS)]          # a step whose local sample is empty yields none
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y).backward()
        seen[pt.steps] = sorted(batch.g_id.tolist())
        opt.step()
    return {"params": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "ledger": pt.ledger, "epsilon": pt.epsilon, "steps": pt.steps, "seen": seen}


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
    graphs = _graphs(60)
    folder = partition_graph_list(graphs, tmp_path / "g", num_parts=1)
    single = _graph_run(graphs, GraphSampler(sampling_stream="counter"), make_private)
    sharded = _graph_run(str(folder), "graphs", make_private_sharded)
    assert sharded["seen"] == single["seen"] and sharded["ledger"] == single["ledger"]
    assert _rel(sharded["params"], single["params"]) < 1e-6
    # control: the generator stream draws other graphs
    other = _graph_run(graphs, GraphSampler(), make_private)
    assert other["seen"] != single["seen"]


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
