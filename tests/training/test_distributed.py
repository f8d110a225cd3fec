"""Data-parallel DP-MLP and HeterPoisson (gloo, 2 local processes) equal the single-process run."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.datasets import load_dataset
from gnnprivacy.sampling.star_batch import StarBatch
from gnnprivacy.training.distributed import (DistributedDPMLPTrainer,
                                                DistributedHeterPoissonTrainer, shard,
                                                shard_star_batch, spawn_local)
from gnnprivacy.training.node_dp import HeterPoissonTrainer
from gnnprivacy.training.node_dp.dpmlp import DPMLPTrainer

KW = dict(noise_multiplier=1.0, steps=12, batch_size=48, lr=0.01, generator=7)


def _data():
    return load_dataset("csbm", num_nodes=400, num_features=12, seed=0)


def _result(trainer) -> dict:
    return {"params": {k: v.detach().clone() for k, v in trainer.model_.state_dict().items()},
            "ledger": trainer.ledger_, "epsilon": trainer.epsilon_, "steps": trainer.steps_}


def _worker(rank: int, world_size: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    trainer = DistributedDPMLPTrainer(**KW).fit(_data())
    assert trainer.info_["world_size"] == world_size
    torch.save(_result(trainer), f"{out_dir}/rank{rank}.pt")


def _secure_worker(rank: int, world_size: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    kw = {**KW, "generator": None, "secure_mode": True}
    trainer = DistributedDPMLPTrainer(**kw).fit(_data())
    torch.save({"sample_state": trainer._gens["sample"].get_state(), **_result(trainer)},
               f"{out_dir}/secure{rank}.pt")


def test_secure_mode_shares_rank0_sampling_state(tmp_path):
    # OS-seeded samplers differ per process; rank 0's state is broadcast, so every rank draws
    # the same global batches (equal final states) and holds the same model.
    spawn_local(_secure_worker, 2, str(tmp_path), start_method="fork")
    a, b = (torch.load(tmp_path / f"secure{r}.pt") for r in range(2))
    assert torch.equal(a["sample_state"], b["sample_state"])
    assert all(torch.equal(a["params"][k], b["params"][k]) for k in a["params"])
    assert a["ledger"] == b["ledger"]


def test_shard_partitions_the_batch():
    batch = torch.arange(11)
    parts = [shard(batch, r, 3) for r in range(3)]
    assert sorted(torch.cat(parts).tolist()) == batch.tolist()
    assert max(p.numel() for p in parts) - min(p.numel() for p in parts) <= 1


def test_without_a_group_it_is_the_single_process_trainer():
    data = _data()
    a, b = _result(DPMLPTrainer(**KW).fit(data)), _result(DistributedDPMLPTrainer(**KW).fit(data))
    assert a["ledger"] == b["ledger"]
    # the same samples and noise draws; DPMLPTrainer runs on the make_private path, whose
    # row-wise clipped sums add in another order than the closure engine's (float rounding)
    for k in a["params"]:
        assert torch.allclose(a["params"][k], b["params"][k], rtol=1e-4, atol=1e-6)


def test_two_processes_match_the_single_process_run(tmp_path):
    spawn_local(_worker, 2, str(tmp_path), start_method="fork")  # fork: no re-import
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = _result(DPMLPTrainer(**KW).fit(_data()))
    for k, v in single["params"].items():
        assert torch.equal(ranks[0]["params"][k], ranks[1]["params"][k])  # one model
        torch.testing.assert_close(ranks[0]["params"][k], v, rtol=1e-4, atol=1e-5)
    assert ranks[0]["ledger"] == ranks[1]["ledger"] == single["ledger"]
    assert ranks[0]["epsilon"] == single["epsilon"] and ranks[0]["steps"] == 12
    # positive control: another sampling/noise seed is far outside the tolerance
    other = _result(DPMLPTrainer(**{**KW, "generator": 8}).fit(_data()))
    assert any(not torch.allclose(other["params"][k], v, rtol=1e-4, atol=1e-5)
               for k, v in single["params"].items())


HP = dict(noise_multiplier=1.0, steps=6, q_b=0.2, degree_public=True, hidden_channels=16,
          generator=3)


def _hp_worker(rank: int, world_size: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    trainer = DistributedHeterPoissonTrainer("gcn", **HP).fit(_data())
    assert trainer.world_size_ == world_size
    torch.save(_result(trainer), f"{out_dir}/hp{rank}.pt")


def test_shard_star_batch_partitions_the_subgraphs():
    batch = StarBatch(torch.tensor([5, 6, 7, 8, 9]), torch.tensor([1, 2, 3, 4, 0, 1]),
                      torch.tensor([0, 0, 2, 3, 3, 4]), 5)
    parts = [shard_star_batch(batch, r, 2) for r in range(2)]
    assert [p.centers.tolist() for p in parts] == [[5, 6], [7, 8, 9]]
    assert parts[0].periph_nodes.tolist() == [1, 2] and parts[0].periph_subgraph.tolist() == [0, 0]
    assert parts[1].periph_nodes.tolist() == [3, 4, 0, 1]
    assert parts[1].periph_subgraph.tolist() == [0, 1, 1, 2]


@pytest.mark.slow  # the HeterPoisson epsilon at the end of each of the 3 fits takes seconds
def test_heterpoisson_two_processes_match_the_single_process_run(tmp_path):
    single = _result(HeterPoissonTrainer("gcn", **HP).fit(_data()))
    spawn_local(_hp_worker, 2, str(tmp_path), start_method="fork")
    ranks = [torch.load(tmp_path / f"hp{r}.pt") for r in range(2)]
    for k, v in single["params"].items():
        assert torch.equal(ranks[0]["params"][k], ranks[1]["params"][k])
        torch.testing.assert_close(ranks[0]["params"][k], v, rtol=1e-4, atol=1e-5)
    assert ranks[0]["ledger"] == ranks[1]["ledger"] == single["ledger"]
