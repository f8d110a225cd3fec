"""Faults of a sharded run, each one clear error on every rank (or a run that works): a part
missing a file or copied from another partition, a partition for another number of ranks, a
rank that dies in a user's loop, and a resume on another number of ranks."""

from __future__ import annotations

import datetime
import multiprocessing
import os
import shutil
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F
from torch_geometric.nn import GCNConv

from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.shards import partition_graph
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.distributed import init_file_group, spawn_local
from gnnprivacy.training.sharded import (ShardedHeterPoissonTrainer, ShardedRunError,
                                         make_private_sharded)

KW = dict(noise_multiplier=1.0, steps=6, batch_size=40, seed=3)


def _data():
    return load_dataset("csbm", num_nodes=400, num_features=12, seed=0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.out = GCNConv(12, 16), torch.nn.Linear(16, 4)

    def forward(self, x, edge_index):
        return self.out(torch.relu(self.conv(x, edge_index)))


def _fork(target, world: int, *args, timeout: float = 120) -> list[int]:
    """Exit codes of ``target(rank, world, init, *args)`` in ``world`` forked processes
    sharing a file-initialised group with a 30 s collective timeout."""
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_entry, args=(target, r, world, *args)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    return [p.exitcode for p in procs]


def _entry(target, rank, world, out, *args):
    torch.set_num_threads(1)
    init_file_group(f"{out}/init", rank, world, timeout=datetime.timedelta(seconds=30))
    try:
        outcome = target(rank, world, out, *args)
    except (InvalidParameterError, ShardedRunError) as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    Path(f"{out}/outcome{rank}.txt").write_text(str(outcome))
    os._exit(0)                   # a broken group cannot be torn down without its peer


def _open_and_train(rank, world, out, folder, die_at=None):
    """A user's loop over ``folder``; rank 1 dies (os._exit) at step ``die_at`` before its
    step's all-reduce."""
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = make_private_sharded(model, opt, folder, sampler="heterpoisson", **KW)
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                        batch.y[batch.center]).backward()
        if rank == 1 and pt.steps == die_at:
            os._exit(3)
        opt.step()
    return f"finished {pt.steps}"


def _outcomes(out, world):
    return [Path(f"{out}/outcome{r}.txt").read_text() for r in range(world)]


@pytest.mark.parametrize("damage", ["missing file", "part of another partition",
                                    "three ranks, two parts"])
def test_a_bad_partition_is_one_error_on_every_rank(tmp_path, damage):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="metis")
    world = 2
    if damage == "missing file":
        (folder / "part1" / "src.npy").unlink()
    elif damage == "part of another partition":
        other = partition_graph(data, tmp_path / "o", num_parts=2, method="contiguous")
        shutil.rmtree(folder / "part1")
        shutil.copytree(other / "part1", folder / "part1")
    else:
        world = 3
    assert _fork(_open_and_train, world, str(tmp_path), str(folder)) == [0] * world
    said = _outcomes(tmp_path, world)
    assert len(set(said)) == 1, said                        # the same line on every rank
    line = said[0]
    assert line.startswith("InvalidParameterError: rank ") and "\n" not in line
    expect = {"missing file": "rank 1 of 2: parameter 'path' must be complete shards",
              "part of another partition": "part1 comes from another one",
              "three ranks, two parts": "rank 0 of 3: parameter 'shards' must be a partition "
                                        "into 3 part(s)"}[damage]
    assert expect in line, line
    assert "gloo" not in line.lower()


def test_broken_control_without_the_agreement_rank_0_gets_another_error(tmp_path, monkeypatch):
    """Each rank believing its own outcome is everyone's (no exchange): rank 1 stops with the
    file error while rank 0 goes on and fails in its next collective, another message."""
    import gnnprivacy.training.sharded as sharded

    def alone(out, value):
        out[:] = [value] * len(out)

    monkeypatch.setattr(sharded.dist, "all_gather_object", alone)
    folder = partition_graph(_data(), tmp_path / "s", num_parts=2, method="metis")
    (folder / "part1" / "src.npy").unlink()
    assert _fork(_open_and_train, 2, str(tmp_path), str(folder)) == [0, 0]
    said = _outcomes(tmp_path, 2)
    assert said[1].startswith("InvalidParameterError: ") and "missing part1/src.npy" in said[1]
    assert said[0].startswith("ShardedRunError: rank 0 of 2: a collective failed"), said


def test_a_rank_that_dies_in_a_users_loop_stops_the_other_with_one_line(tmp_path):
    folder = partition_graph(_data(), tmp_path / "s", num_parts=2, method="metis")
    assert _fork(_open_and_train, 2, str(tmp_path), str(folder), 3) == [0, 3]
    line = (tmp_path / "outcome0.txt").read_text()
    assert line.startswith("ShardedRunError: rank 0 of 2: a collective failed at step 3"), line
    assert "the run is not finished" in line and "\n" not in line


# -------------------------------------------------------------- resume on another world size
def _train(folder_or_data, *, sharded, stop=None, state=None):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    if sharded:
        pt = make_private_sharded(model, opt, folder_or_data, sampler="heterpoisson", **KW)
    else:
        from gnnprivacy.training.private import HeterPoissonSubgraphs, make_private

        pt = make_private(model, opt, folder_or_data,
                          sampler=HeterPoissonSubgraphs(sampling_stream="counter"), **KW)
    if state is not None:
        pt.load_state_dict(state)
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                        batch.y[batch.center]).backward()
        opt.step()
        if stop is not None and pt.steps == stop:
            break
    return pt, model


def _two_ranks_to_step_3(rank, world, folder, out):
    torch.set_num_threads(1)
    pt, _ = _train(folder, sharded=True, stop=3)
    if rank == 0:
        torch.save(pt.state_dict(), f"{out}/state.pt")
    pt.guard.stop()


@pytest.mark.slow
def test_a_users_loop_resumes_on_another_number_of_ranks(tmp_path):
    """make_private_sharded's state is the counter stream's (seed, step), the model, the
    optimizer and the ledger: none depends on the partition, so a state saved on 2 ranks
    continues on 1 rank (a one-part partition) to the uninterrupted run."""
    data = _data()
    two = partition_graph(data, tmp_path / "two", num_parts=2, method="metis")
    one = partition_graph(data, tmp_path / "one", num_parts=1)
    spawn_local(_two_ranks_to_step_3, 2, str(two), str(tmp_path), start_method="fork")
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    assert state["steps"] == 3 and state["sampling_stream"][1] == 3
    resumed, model = _train(one, sharded=True, state=state)
    whole, reference = _train(data, sharded=False)
    assert resumed.steps == whole.steps == KW["steps"]
    assert resumed.ledger == whole.ledger
    num = sum(float((a - b).norm() ** 2) for a, b in zip(model.state_dict().values(),
                                                          reference.state_dict().values()))
    den = sum(float(b.norm() ** 2) for b in reference.state_dict().values())
    assert (num / den) ** 0.5 < 1e-5
    # broken control: without the stream's state the resumed run draws other batches
    state.pop("sampling_stream")
    _, other = _train(one, sharded=True, state=state)
    num = sum(float((a - b).norm() ** 2) for a, b in zip(other.state_dict().values(),
                                                          reference.state_dict().values()))
    assert (num / den) ** 0.5 > 1e-3


def _checkpointed(rank, world, folder, path):
    torch.set_num_threads(1)
    ShardedHeterPoissonTrainer("gcn", noise_multiplier=1.0, steps=4, q_b=0.1,
                               hidden_channels=16, generator=5, checkpoint_path=path,
                               checkpoint_every=2).fit(folder)


def test_the_trainer_refuses_a_resume_on_another_number_of_ranks(tmp_path):
    data = _data()
    two = partition_graph(data, tmp_path / "two", num_parts=2, method="metis")
    one = partition_graph(data, tmp_path / "one", num_parts=1)
    ckpt = tmp_path / "ck.pt"
    spawn_local(_checkpointed, 2, str(two), str(ckpt), start_method="fork")
    # the finished run's last checkpoint is kept by the trainer (the runner removes it)
    assert torch.load(ckpt, weights_only=True)["world_size"] == 2
    trainer = ShardedHeterPoissonTrainer("gcn", noise_multiplier=1.0, steps=4, q_b=0.1,
                                         hidden_channels=16, generator=5,
                                         checkpoint_path=str(ckpt), resume=True)
    with pytest.raises(InvalidParameterError, match="written by a run on 2 ranks over a "
                                                    "2-part partition"):
        trainer.fit(one)
    # control: the same resume on 2 ranks is accepted (the checkpoint says step 4 of 4)
    spawn_local(_resumed, 2, str(two), str(ckpt), start_method="fork")


def _resumed(rank, world, folder, path):
    trainer = ShardedHeterPoissonTrainer("gcn", noise_multiplier=1.0, steps=4, q_b=0.1,
                                         hidden_channels=16, generator=5, checkpoint_path=path,
                                         resume=True).fit(folder)
    assert trainer.resumed_from_step_ == 4
