"""Sharded HeterPoisson (gloo, 2 local processes) equals the single-process run, step by step."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.shards import open_shard, partition_graph
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling import HeterPoissonSampler
from gnnprivacy.sampling.counter_rng import CounterRandom
from gnnprivacy.training.distributed import spawn_local
from gnnprivacy.training.node_dp import HeterPoissonTrainer
from gnnprivacy.training.sharded import (ShardedHeterPoissonTrainer, ShardedRunError, _Part,
                                         is_collective_failure)

KW = dict(noise_multiplier=1.0, steps=10, q_b=0.1, lr=0.01, hidden_channels=16, generator=5)


def _data():
    return load_dataset("csbm", num_nodes=400, num_features=12, seed=0)


def _stars(batch, ids=None) -> set[tuple[int, tuple[int, ...]]]:
    """Each star as (centre, sorted peripherals), in global ids."""
    def glob(t):
        return (t if ids is None else ids[t]).tolist()

    centers = glob(batch.centers)
    out = {c: [] for c in centers}
    for j, s in zip(glob(batch.periph_nodes), batch.periph_subgraph.tolist()):
        out[centers[s]].append(j)
    return {(c, tuple(sorted(p))) for c, p in out.items()}


@pytest.mark.parametrize("pool", ["all_visible", "train_only"])
def test_the_union_of_the_parts_samples_is_the_global_sample(tmp_path, pool):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=3, method="metis")
    trainer = ShardedHeterPoissonTrainer("gcn", peripheral_pool=pool, M=2.0, **KW)
    trainer.q_b_ = 0.2
    elig = data.train_mask if pool == "train_only" else torch.ones(400, dtype=torch.bool)
    sampler = HeterPoissonSampler(data.edge_index, 400, candidates=data.train_mask,
                                  eligible=elig, q_b=0.2, M=2.0)
    parts = [_Part(open_shard(folder, k)) for k in range(3)]
    for step in range(4):
        rng = CounterRandom(seed=11, step=step)
        union = set()
        for part in parts:
            batch, ids, y = trainer._sample(part, rng)
            assert torch.equal(y, data.y[ids[batch.centers]])
            union |= _stars(batch, ids)
        assert union == _stars(sampler.sample(rng))
        assert sum(len(p) for _, p in union) > 0
    # broken control: another step's sample is a different set of stars
    assert _stars(sampler.sample(CounterRandom(seed=11, step=9))) != union


def _worker(rank: int, world: int, folder: str, out: str, kw: dict) -> None:
    torch.set_num_threads(1)
    trainer = ShardedHeterPoissonTrainer("gcn", **kw).fit(folder)
    torch.save({"params": trainer.model_.state_dict(), "ledger": trainer.ledger_,
                "epsilon": trainer.epsilon_, "exchange": trainer.exchange_,
                "info": trainer.info_, "seed": trainer.counter_seed_}, f"{out}/rank{rank}.pt")


def _close(a: dict, b: dict) -> bool:
    return all(torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-7) for k in a)


def test_two_processes_equal_the_single_process_run(tmp_path):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="metis")
    spawn_local(_worker, 2, str(folder), str(tmp_path), KW, start_method="fork")
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = HeterPoissonTrainer("gcn", sampling_stream="counter", **KW).fit(data)
    params = single.model_.state_dict()
    assert all(torch.equal(ranks[0]["params"][k], ranks[1]["params"][k]) for k in params)
    assert _close(ranks[0]["params"], params)
    assert ranks[0]["ledger"] == ranks[1]["ledger"] == single.ledger_
    assert ranks[0]["epsilon"] == single.epsilon_
    moved = [r["exchange"] for r in ranks]
    assert all(m["steps"] == 10 for m in moved) and sum(m["remote_rows"] for m in moved) > 0
    # what crossed: ids + rows served, within 2x of the remote neighbours' features
    sent = sum(m["bytes_sent"] for m in moved)
    remote = sum(m["remote_feature_bytes"] for m in moved)
    assert remote <= sent <= 2 * remote + 64 * 10
    # broken control: the single-process run with another seed is far outside the tolerance
    other = HeterPoissonTrainer("gcn", sampling_stream="counter", **{**KW, "generator": 6})
    assert not _close(ranks[0]["params"], other.fit(data).model_.state_dict())


def test_secure_mode_shares_rank_0s_sampling_seed(tmp_path):
    # OS-seeded sampling generators differ per rank: rank 0's stream seed is broadcast, or the
    # ranks would disagree on which neighbours are centres (overlap removal)
    folder = partition_graph(_data(), tmp_path / "s", num_parts=2)
    kw = {**KW, "generator": None, "secure_mode": True, "steps": 2}
    spawn_local(_worker, 2, str(folder), str(tmp_path), kw, start_method="fork")
    a, b = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    assert a["seed"] == b["seed"]
    assert all(torch.equal(a["params"][k], b["params"][k]) for k in a["params"])
    spawn_local(_worker, 2, str(folder), str(tmp_path), kw, start_method="fork")
    assert torch.load(tmp_path / "rank0.pt")["seed"] != a["seed"]   # fresh OS entropy


def test_one_part_without_a_group_is_the_single_process_run(tmp_path):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=1)
    kw = {**KW, "noise_multiplier": None, "epsilon": 6.0, "feature_norm": "auto"}
    sharded = ShardedHeterPoissonTrainer("sage", **kw).fit(folder)
    single = HeterPoissonTrainer("sage", sampling_stream="counter", **kw).fit(data)
    assert sharded.feature_norm_.mode == single.feature_norm_.mode == "standardize_public"
    assert sharded.feature_norm_.shift == pytest.approx(single.feature_norm_.shift, rel=1e-12)
    assert sharded.feature_norm_.scale == pytest.approx(single.feature_norm_.scale, rel=1e-12)
    assert sharded.noise_multiplier_ == single.noise_multiplier_
    assert sharded.ledger_ == single.ledger_
    assert _close(sharded.model_.state_dict(), single.model_.state_dict())


def test_a_partition_for_another_world_size_is_refused(tmp_path):
    folder = partition_graph(_data(), tmp_path / "s", num_parts=2)
    with pytest.raises(InvalidParameterError, match="one per rank"):
        ShardedHeterPoissonTrainer("gcn", **KW).fit(folder)
    with pytest.raises(InvalidParameterError, match="sampling_stream"):
        ShardedHeterPoissonTrainer("gcn", sampling_stream="generator")


def test_counter_stream_resumes_where_it_stopped(tmp_path):
    # a 10-step run cut after its checkpoint at step 4, then resumed, equals the uncut run:
    # the counter stream continues at step 4 (a restart at 0 would repeat steps 0-3's sample)
    data = _data()
    kw = {**KW, "sampling_stream": "counter", "checkpoint_path": str(tmp_path / "ck.pt"),
          "checkpoint_every": 4}
    full = HeterPoissonTrainer("gcn", **{k: v for k, v in kw.items()
                                         if not k.startswith("checkpoint")}).fit(data)

    class Cut(Exception):
        pass

    cut = HeterPoissonTrainer("gcn", **kw)
    save = cut._save

    def save_then_stop(engine):
        save(engine)
        if engine.steps_ == 4:
            raise Cut

    cut._save = save_then_stop
    with pytest.raises(Cut):
        cut.fit(data)
    resumed = HeterPoissonTrainer("gcn", **kw, resume=True).fit(data)
    assert resumed.resumed_from_step_ == 4
    assert resumed.ledger_ == full.ledger_
    assert _close(resumed.model_.state_dict(), full.model_.state_dict())


def _killed_worker(rank: int, world: int, init: str, folder: str, out: str, kw: dict) -> None:
    """Rank 1 dies (os._exit) while fetching the features of step 3; rank 0 reports."""
    import datetime
    import os

    from gnnprivacy.training.distributed import init_file_group
    from gnnprivacy.training.sharded import ShardedRunError

    torch.set_num_threads(1)
    init_file_group(init, rank, world, timeout=datetime.timedelta(seconds=30))
    trainer = ShardedHeterPoissonTrainer("gcn", **kw)
    if rank == 1:
        features = trainer._features

        def die_at_step_3(part, ids):
            if trainer._step_now == 3:
                os._exit(3)
            return features(part, ids)

        trainer._features = die_at_step_3
    try:
        trainer.fit(folder)
        outcome = "finished"
    except ShardedRunError as exc:
        outcome = f"error: {exc}"
    with open(f"{out}/outcome{rank}.txt", "w") as fh:
        fh.write(f"{outcome}\nepsilon_={'epsilon_' in vars(trainer)}")
    os._exit(0)  # the group cannot be torn down cleanly without its peer


def test_a_killed_rank_stops_the_other_and_resume_finishes_the_run(tmp_path):
    import multiprocessing

    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="metis")
    kw = {**KW, "checkpoint_path": str(tmp_path / "ck.pt"), "checkpoint_every": 2}
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_killed_worker, args=(r, 2, str(tmp_path / "init"), str(folder),
                                                      str(tmp_path), kw)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 3]
    text = (tmp_path / "outcome0.txt").read_text()
    assert text.startswith("error: rank 0 of 2: a collective failed at step 3"), text
    assert "the run is not finished" in text and "epsilon_=False" in text   # no result
    assert not (tmp_path / "outcome1.txt").exists()
    assert torch.load(tmp_path / "ck.pt", weights_only=False)["step"] == 2
    # --resume: both ranks continue from the step-2 checkpoint, to the uninterrupted result
    spawn_local(_worker, 2, str(folder), str(tmp_path), {**kw, "resume": True},
                start_method="fork")
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = HeterPoissonTrainer("gcn", sampling_stream="counter", **KW).fit(data)
    assert ranks[0]["ledger"] == ranks[1]["ledger"] == single.ledger_
    assert _close(ranks[0]["params"], single.model_.state_dict())
    assert ranks[0]["exchange"]["steps"] == KW["steps"] - 2      # only the remaining steps ran


def test_only_collective_failures_are_reported_as_a_stopped_rank():
    gloo = RuntimeError("[../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:35210: "
                        "Connection reset by peer")
    late = RuntimeError("[../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 30000ms")
    assert is_collective_failure(gloo) and is_collective_failure(late)
    # broken controls: a model's own error and an already wrapped one pass through
    assert not is_collective_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not is_collective_failure(ShardedRunError("rank 0 of 2: a collective failed"))
