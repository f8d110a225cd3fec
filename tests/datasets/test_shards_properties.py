"""Property tests of shard folders (issue 45) and of the degree bounding in rounds (issue 47).

1. A shard folder damaged at random (a file deleted, cut, a byte changed, a file of another
   partition swapped in, re-saved with another dtype or length, a JSON value replaced, a JSON
   file replaced by text) is refused with one `InvalidParameterError` by the part that reads
   it, or, when every part opens, holds exactly the data the partition wrote: never another
   exception, never damaged data accepted. Node shards and graph shards.
2. The bounding rounds over random parts give the sequential greedy pass's bounded graph.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data

from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.graph_shards import open_graph_shard, partition_graph_list
from gnnprivacy.datasets.shard_files import meta_digest
from gnnprivacy.datasets.shards import open_shard, partition_graph
from gnnprivacy.errors import InvalidParameterError

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                      HealthCheck.too_slow])


@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    """Two node partitions and two graph partitions of the same data (the second of each
    is the source of swapped files)."""
    base = tmp_path_factory.mktemp("shards")
    data = load_dataset("csbm", num_nodes=60, num_features=4, seed=0)
    gen = torch.Generator().manual_seed(0)
    graphs = [Data(x=torch.randn(k, 3, generator=gen),
                   edge_index=torch.randint(0, k, (2, 2 * k), generator=gen),
                   y=torch.tensor([i % 2])) for i, k in enumerate([3, 5, 4, 6, 2, 7, 3, 4])]
    return {"nodes": (partition_graph(data, base / "a", num_parts=2, method="metis"),
                      partition_graph(data, base / "b", num_parts=2, method="contiguous")),
            "graphs": (partition_graph_list(graphs, base / "g", num_parts=2, train=[0, 1, 2, 3, 4],
                                            test=[5, 6, 7]),
                       partition_graph_list(graphs[::-1], base / "h", num_parts=2))}


def _snapshot(folder: Path, opener) -> dict:
    parts = [opener(folder, k) for k in range(2)]
    out = {"meta": meta_digest(parts[0].meta)}
    for p in parts:
        for name, value in vars(p).items():
            if isinstance(value, np.ndarray):
                out[f"{p.part}/{name}"] = np.array(value)
            elif name == "masks":
                out.update({f"{p.part}/{k}": np.array(v) for k, v in value.items()})
    return out


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] if isinstance(a[k], str) else
        (a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k])) for k in a)


json_values = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.text(max_size=6),
                        st.floats(allow_nan=True), st.lists(st.integers(-1, 100), max_size=3),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
mutations = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 10**6)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.floats(0, 0.99)),
    st.tuples(st.just("byte"), st.integers(0, 10**6), st.floats(0, 0.999), st.integers(1, 255)),
    st.tuples(st.just("swap"), st.integers(0, 10**6)),
    st.tuples(st.just("resave"), st.integers(0, 10**6),
              st.sampled_from(["int32", "float64", "float16", "bool", "short"])),
    st.tuples(st.just("json"), st.sampled_from(["meta.json", "part0/part.json",
                                                "part1/part.json"]),
              st.integers(0, 100), json_values),
    st.tuples(st.just("text"), st.sampled_from(["meta.json", "part1/part.json"]),
              st.text(max_size=20)))


def _mutate(folder: Path, other: Path, mutation) -> None:
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    kind = mutation[0]
    if kind in ("json", "text"):
        path = folder / mutation[1]
        if kind == "text":
            path.write_text(mutation[2])
            return
        doc = json.loads(path.read_text())
        keys = sorted(doc) + ["extra"]
        doc[keys[mutation[2] % len(keys)]] = mutation[3]
        path.write_text(json.dumps(doc))
        return
    rel = files[mutation[1] % len(files)]
    path = folder / rel
    if kind == "delete":
        path.unlink()
    elif kind == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[:int(len(data) * mutation[2])])
    elif kind == "byte":
        data = bytearray(path.read_bytes())
        if data:
            i = int(len(data) * mutation[2])
            data[i] = (data[i] + mutation[3]) % 256
            path.write_bytes(bytes(data))
    elif kind == "swap":
        if (other / rel).is_file():
            shutil.copyfile(other / rel, path)
    elif kind == "resave" and rel.endswith(".npy"):
        a = np.load(path)
        np.save(path, a[:-1] if mutation[2] == "short" and a.ndim else a.astype(mutation[2]))


def _check(partitions, kind, opener, mutation, tmp_path_factory):
    good, other = partitions[kind]
    work = tmp_path_factory.mktemp("m") / "s"
    shutil.copytree(good, work)
    _mutate(work, other, mutation)
    try:
        after = _snapshot(work, opener)
    except InvalidParameterError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 2000
        return "refused"
    assert _same(after, _snapshot(good, opener)), f"damaged data accepted: {mutation}"
    return "accepted"


@settings(max_examples=80, **SETTINGS)
@given(mutation=mutations)
@example(mutation=("byte", 1, 0.0234375, 1))   # meta.json's "partition_id" renamed (found)
@example(mutation=("json", "meta.json", 100, None))
def test_a_damaged_node_shard_folder_is_refused_or_unchanged(partitions, tmp_path_factory,
                                                            mutation):
    _check(partitions, "nodes", open_shard, mutation, tmp_path_factory)


@settings(max_examples=40, **SETTINGS)
@given(mutation=mutations)
def test_a_damaged_graph_shard_folder_is_refused_or_unchanged(partitions, tmp_path_factory,
                                                             mutation):
    _check(partitions, "graphs", open_graph_shard, mutation, tmp_path_factory)


@pytest.mark.parametrize("kind", ["nodes", "graphs"])
def test_every_file_and_every_key_damaged(partitions, tmp_path_factory, kind):
    """The systematic companion of the random search: each file of the folder with each
    damage, and each key of meta.json and of a part.json set to each wrong type."""
    opener = open_shard if kind == "nodes" else open_graph_shard
    good = partitions[kind][0]
    files = sorted(p for p in good.rglob("*") if p.is_file())
    outcomes = []
    for i in range(len(files)):
        for damage in (("delete", i), ("truncate", i, 0.5), ("byte", i, 0.7, 3), ("swap", i),
                       ("resave", i, "int32"), ("resave", i, "short")):
            outcomes.append(_check(partitions, kind, opener, damage, tmp_path_factory))
    for doc in ("meta.json", "part0/part.json"):
        keys = len(json.loads((good / doc).read_text())) + 1
        for key in range(keys):
            for value in (None, 7, -1, "x", [], {}, 1.5, True):
                outcomes.append(_check(partitions, kind, opener, ("json", doc, key, value),
                                       tmp_path_factory))
    assert outcomes.count("refused") > 0.8 * len(outcomes)


def test_the_oracle_catches_a_silent_change(partitions, tmp_path_factory):
    """Broken control: with the digests dropped from meta.json (and part.json's digest of
    meta.json), a part's features swapped from another partition of the same shape open
    silently, and the oracle says so."""
    good, _ = partitions["nodes"]
    work = tmp_path_factory.mktemp("c") / "s"
    shutil.copytree(good, work)
    x = np.load(work / "part0" / "x.npy")
    np.save(work / "part0" / "x.npy", x[::-1].copy())                    # same shape, other rows
    with pytest.raises(InvalidParameterError, match="another content"):
        open_shard(work, 0)
    meta = json.loads((work / "meta.json").read_text())
    meta.pop("digests")
    (work / "meta.json").write_text(json.dumps(meta))
    assert not _same(_snapshot(work, open_shard), _snapshot(good, open_shard))


# ------------------------------------------------------------ the bounding rounds (issue 47)
@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 40), m=st.integers(0, 120), parts=st.integers(1, 4),
       k=st.integers(0, 4), frac=st.floats(0.05, 1.0), bound_all=st.booleans(),
       seed=st.integers(0, 2**31))
def test_bounding_in_rounds_over_parts_is_the_sequential_pass(n, m, parts, k, frac, bound_all,
                                                               seed):
    from gnnprivacy.sampling._graph import clean_graph
    from gnnprivacy.sampling.bounded_rounds import PartRounds, bounded_edges
    from gnnprivacy.sampling.counter_rng import CounterRandom
    from gnnprivacy.sampling.degree_bounded import sample_degree_bounded_subgraphs

    rng = np.random.default_rng(seed)
    edges = torch.from_numpy(rng.integers(0, n, (2, m)))
    train = rng.random(n) < frac
    train[rng.integers(n)] = True
    keyed = CounterRandom(seed % 1000)
    want = sample_degree_bounded_subgraphs(edges, n, train_nodes=torch.from_numpy(train),
                                           max_degree=k, generator=keyed,
                                           bound_all_nodes=bound_all).edge_index.numpy()
    graph = clean_graph(edges, n, symmetrize=True, where="test")
    rowptr, src = graph.rowptr.numpy(), graph.src.numpy()
    owner = rng.integers(0, parts, n)
    pieces = []
    for p in range(parts):
        nodes = np.flatnonzero(owner == p)
        sizes = rowptr[nodes + 1] - rowptr[nodes]
        nbrs = (np.concatenate([src[rowptr[v]:rowptr[v + 1]] for v in nodes])
                if nodes.size else np.zeros(0, np.int64))
        pieces.append(PartRounds(nodes, np.concatenate([[0], np.cumsum(sizes)]), nbrs,
                                 is_train=lambda ids: train[ids], owner=lambda ids: owner[ids],
                                 part=p, rng=keyed, max_degree=k, bound_all_nodes=bound_all,
                                 num_nodes=n))
    got = bounded_edges(pieces, max_rounds=2 * m + 2)      # each round decides an edge
    assert np.array_equal(got, want)
    degree = np.bincount(got[1], minlength=n)
    assert degree.max(initial=0) <= k                      # the bound holds


def test_broken_control_rounds_that_keep_one_sided_proposals_differ():
    """Keeping an edge proposed by one end only (no agreement) breaks the bound or the
    sequential result on a star: the centre is proposed by every leaf."""
    from gnnprivacy.sampling.bounded_rounds import PartRounds, bounded_edges
    from gnnprivacy.sampling.counter_rng import CounterRandom

    n = 8
    leaves = np.arange(1, n)
    nbrs = np.concatenate([leaves, np.zeros(n - 1, np.int64)])
    indptr = np.concatenate([[0, n - 1], n - 1 + np.arange(1, n)])
    train = np.ones(n, bool)

    class OneSided(PartRounds):
        def incoming(self, targets, sources, kinds):
            self.rounds += 1
            mine = np.flatnonzero(self.prop >= 0)
            self.status[self._entry(mine, self.prop[mine])] = 1     # keep every proposal
            np.add.at(self.count, mine, 1)
            self._fill(np.flatnonzero(self.count >= self.k))

    part = OneSided(np.arange(n), indptr, nbrs, is_train=lambda ids: train[ids],
                    owner=lambda ids: np.zeros_like(ids), part=0, rng=CounterRandom(1),
                    max_degree=2, bound_all_nodes=False, num_nodes=n)
    got = bounded_edges([part], max_rounds=50)
    pairs = {frozenset(e) for e in got.T.tolist()}
    assert sum(0 in p for p in pairs) > 2                 # the centre got more than K = 2
