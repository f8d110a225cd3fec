"""``gnnprivacy train-sharded``: rank 0 writes a finished record only; a killed rank leaves
none; ``--resume`` continues from rank 0's checkpoint to the uninterrupted run's ledger."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from gnnprivacy.cli import main
from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.shards import partition_graph
from gnnprivacy.method.sharded import SHARDED_UNACCOUNTED, run_sharded
from gnnprivacy.training.distributed import spawn_local
from gnnprivacy.training.node_dp import HeterPoissonTrainer

VALUES = {"steps": 10, "q_b": 0.1, "hidden": 16, "epsilon": 8.0, "seed": 3}


def _data():
    return load_dataset("csbm", num_nodes=400, num_features=12, seed=0)


def _records(runs: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(runs.glob("*.json"))]


def _run(rank: int, world: int, folder: str, values: dict, out: str) -> None:
    torch.set_num_threads(1)

    def log(message: str) -> None:
        with open(f"{out}/log{rank}.txt", "a") as fh:
            fh.write(message + "\n")

    record = run_sharded(values, folder, checkpoint_every=2, log=log)
    with open(f"{out}/returned{rank}.txt", "w") as fh:
        fh.write("record" if record is not None else "none")


def _killed(rank: int, world: int, init: str, folder: str, values: dict, out: str) -> None:
    """Rank 1 dies (os._exit) while fetching the features of step 3; rank 0 reports."""
    import datetime

    from gnnprivacy.training.distributed import init_file_group
    from gnnprivacy.training.sharded import ShardedHeterPoissonTrainer, ShardedRunError

    torch.set_num_threads(1)
    init_file_group(init, rank, world, timeout=datetime.timedelta(seconds=30))
    if rank == 1:     # a forked child: the patch stays in this process
        features = ShardedHeterPoissonTrainer._features

        def die_at_step_3(self, part, ids):
            if self._step_now == 3:
                os._exit(3)
            return features(self, part, ids)

        ShardedHeterPoissonTrainer._features = die_at_step_3
    try:
        run_sharded(values, folder, checkpoint_every=2)
        outcome = "finished"
    except ShardedRunError as exc:
        outcome = f"error: {exc}"
    Path(f"{out}/outcome{rank}.txt").write_text(outcome)
    os._exit(0)   # the group cannot be torn down cleanly without its peer


def _fork_ranks(target, *args, world: int = 2) -> list[int]:
    """Exit codes of ``target(rank, world, *args)`` run in ``world`` forked processes."""
    import multiprocessing

    procs = [multiprocessing.get_context("fork").Process(target=target, args=(r, world, *args))
             for r in range(world)]
    [p.start() for p in procs]
    [p.join(120) for p in procs]
    return [p.exitcode for p in procs]


def test_a_killed_rank_leaves_no_record_and_resume_reaches_the_same_ledger(tmp_path):
    folder = partition_graph(_data(), tmp_path / "s", num_parts=2, method="metis")
    full_runs, runs = tmp_path / "full", tmp_path / "runs"
    spawn_local(_run, 2, str(folder), {**VALUES, "runs_dir": str(full_runs)}, str(tmp_path),
                start_method="fork")
    (full,) = _records(full_runs)       # rank 0 alone wrote it
    assert [(tmp_path / f"returned{r}.txt").read_text() for r in range(2)] == ["record", "none"]
    # rank 0's messages only: the shards' 200 training nodes are a small training set
    (message,) = (tmp_path / "log0.txt").read_text().splitlines()
    assert message.startswith("warning: the shards hold 200 training nodes (fewer than 500")
    assert not (tmp_path / "log1.txt").exists()
    (tmp_path / "log0.txt").unlink()
    assert not list((full_runs / "checkpoints").iterdir())    # done: checkpoint removed

    values = {**VALUES, "runs_dir": str(runs)}
    assert _fork_ranks(_killed, str(tmp_path / "init"), str(folder), values,
                       str(tmp_path)) == [0, 3]
    text = (tmp_path / "outcome0.txt").read_text()
    assert text.startswith("error: rank 0 of 2: a collective failed at step 3"), text
    assert "\n" not in text and "the run is not finished" in text
    assert _records(runs) == []                   # no record: the run is not finished
    (ckpt,) = (runs / "checkpoints").glob("*.pt")
    assert torch.load(ckpt, weights_only=False)["step"] == 2

    spawn_local(_run, 2, str(folder), {**values, "resume": True}, str(tmp_path),
                start_method="fork")
    (resumed,) = _records(runs)
    assert resumed["info"]["resumed_from_step"] == 2
    said = (tmp_path / "log0.txt").read_text().splitlines()
    assert said[1:] == [f"resumed from step 2 of {VALUES['steps']} ({ckpt})"], said
    assert not (tmp_path / "log1.txt").exists()
    assert resumed["info"]["exchange"]["steps"] == VALUES["steps"] - 2   # only the rest ran
    assert resumed["privacy"]["ledger"] == full["privacy"]["ledger"]
    assert resumed["epsilon"] == full["epsilon"]
    assert not (runs / "checkpoints" / ckpt.name).exists()
    # broken control: the run without resume starts again at step 0 (another record's info)
    assert full["info"]["resumed_from_step"] == 0


def test_cli_one_part_writes_a_heterpoisson_record_with_the_trust_model(tmp_path):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=1)
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    result = CliRunner(env=env).invoke(main, [
        "train-sharded", str(folder), "--steps", "10", "--q-b", "0.1", "--hidden", "16",
        "--seed", "3", "--runs-dir", str(runs), "--json"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("warning: the shards hold 200 training nodes") == 1  # rank 0
    (record,) = _records(runs)
    assert record["warnings"][0].startswith("the shards hold 200 training nodes")
    quiet = CliRunner(env=env).invoke(main, [         # -q drops chatter, not this warning
        "train-sharded", str(folder), "--steps", "2", "--q-b", "0.1", "--hidden", "16",
        "--runs-dir", str(tmp_path / "quiet"), "-q"])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr.count("warning: the shards hold 200 training nodes") == 1
    assert record["method"] == "heterpoisson" and record["config"]["method"] == "heterpoisson"
    privacy = record["privacy"]
    assert privacy["sampling_stream"] == "counter"
    assert "one trusted party" in privacy["scope"]
    assert set(SHARDED_UNACCOUNTED) <= set(privacy["unaccounted"])
    assert privacy["unit"] == "node" and privacy["relation"] == "add_or_remove"
    # the same ledger as the single-process trainer with the counter stream and its seeds
    single = HeterPoissonTrainer(**record["info"]["hparams"], sampling_stream="counter",
                                 generator=_seed(3)).fit(data)
    assert record["privacy"]["ledger"] == json.loads(json.dumps(single.ledger_))
    assert record["epsilon"] == single.epsilon_
    # refused: an option of `train` that has no meaning here
    bad = CliRunner(env=env).invoke(main, ["train-sharded", str(folder), "--dataset", "cora"])
    assert bad.exit_code == 2 and "--dataset" in bad.output


def _seed(run_seed: int) -> int:
    from gnnprivacy.method.context import RunContext

    return RunContext(config=None, params=None, data=None, seed=run_seed).seed_for("train")


_TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
needs_torchrun = pytest.mark.skipif(not Path(_TORCHRUN).exists(), reason="no torchrun")


def _torchrun(folder: Path, runs: Path, *options: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``torchrun`` with 2 local ranks on ``folder``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    return ([_TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "gnnprivacy.cli",
             "train-sharded", str(folder), "--q-b", "0.1", "--hidden", "16", "--seed", "3",
             "--runs-dir", str(runs), *options], env)


@needs_torchrun
def test_torchrun_two_processes_write_one_record(tmp_path):
    folder = partition_graph(_data(), tmp_path / "s", num_parts=2, method="metis")
    runs = tmp_path / "runs"
    cmd, env = _torchrun(folder, runs, "--steps", "4")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = _records(runs)
    assert record["info"]["world_size"] == 2 and record["info"]["steps"] == 4
    assert proc.stdout.count("record: ") == 1        # rank 0 alone reports


def _child_with_rank(parent: int, rank: int) -> int | None:
    """The pid of ``parent``'s child process whose environment has ``RANK=rank`` (Linux)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            env = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and f"RANK={rank}".encode() in env:
            return int(entry.name)
    return None


@pytest.mark.slow
@needs_torchrun
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_torchrun_rank_killed_then_resume(tmp_path):
    """A real torchrun run whose rank 1 is SIGKILLed after rank 0's first checkpoint: rank 0
    prints the one-line error and exits 1, no record; ``--resume`` finishes from the
    checkpoint with the uninterrupted run's ledger."""
    import signal
    import time

    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="metis")
    runs = tmp_path / "runs"
    cmd, env = _torchrun(folder, runs, "--steps", "400", "--checkpoint-every", "10", "-q")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not list(runs.glob("checkpoints/*.pt")) and time.monotonic() < deadline:
        time.sleep(0.2)
    victim = _child_with_rank(proc.pid, 1)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and lines[0].startswith("Error: rank 0 of 2: a collective failed"), err
    assert "exitcode  : 1 " in err or "exitcode: 1" in err   # rank 0 exited 1, not killed
    assert _records(runs) == []
    (ckpt,) = runs.glob("checkpoints/*.pt")
    step = torch.load(ckpt, weights_only=False)["step"]
    assert 0 < step < 400

    done = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = _records(runs)
    assert record["info"]["resumed_from_step"] == step
    single = HeterPoissonTrainer(**record["info"]["hparams"], sampling_stream="counter",
                                 generator=_seed(3)).fit(data)
    assert record["privacy"]["ledger"] == json.loads(json.dumps(single.ledger_))


def _scored(rank: int, world: int, folder: str, out: str) -> None:
    from gnnprivacy.training.sharded import ShardedHeterPoissonTrainer

    torch.set_num_threads(1)
    trainer = ShardedHeterPoissonTrainer("gcn", noise_multiplier=1.0, steps=4, q_b=0.1,
                                         hidden_channels=16, generator=5, fanout=3).fit(folder)
    # uneven chunks: rank 0 runs more fetches than rank 1, which must still join them
    score = trainer.score_parts(folder, seed=7, chunk_size=40 if rank == 0 else 1000)
    torch.save({"score": score, "model": trainer.model_, "norm": trainer.feature_norm_},
               f"{out}/scored{rank}.pt")


@pytest.mark.parametrize("split", [True, False])
def test_the_record_accuracy_is_private_inference_over_all_parts(tmp_path, split):
    """With the dataset's split in the shards, the queries are its test (and validation)
    nodes, the ones ``gnnprivacy train`` scores; without one, every non-training node."""
    from gnnprivacy.training.node_dp.private_inference import private_star_logits

    data = _data()
    source = data.clone()
    if not split:
        del source.val_mask, source.test_mask
    folder = partition_graph(source, tmp_path / "s", num_parts=2, method="metis")
    spawn_local(_scored, 2, str(folder), str(tmp_path), start_method="fork")
    a, b = (torch.load(tmp_path / f"scored{r}.pt", weights_only=False) for r in range(2))
    assert a["score"] == b["score"]
    train = data.train_mask
    queries = data.test_mask if split else ~train

    def accuracy(seed, allowed, nodes=queries):
        logits = private_star_logits(a["model"], data.x, data.edge_index, queries=nodes,
                                     allowed=allowed, forbidden=None, fanout=3, seed=seed,
                                     transform=a["norm"].transform)
        return float((logits.argmax(1) == data.y[nodes]).double().mean())

    assert a["score"]["num_test"] == int(queries.sum())
    assert a["score"]["test_accuracy"] == pytest.approx(accuracy(7, ~train), abs=1e-12)
    assert ("val_accuracy" in a["score"]) == split
    if split:
        assert a["score"]["val_accuracy"] == pytest.approx(
            accuracy(7, ~train, data.val_mask), abs=1e-12)
    # broken control: aggregating the training nodes too (a leak) predicts otherwise
    assert accuracy(7, torch.ones_like(train)) != pytest.approx(a["score"]["test_accuracy"])


@pytest.mark.slow
@needs_torchrun
@pytest.mark.parametrize("damage", ["part of another partition", "three parts, two ranks"])
def test_torchrun_a_bad_partition_is_one_line_on_every_rank(tmp_path, damage):
    data = _data()
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="metis")
    if damage == "part of another partition":
        other = partition_graph(data, tmp_path / "o", num_parts=2, method="contiguous")
        shutil.rmtree(folder / "part1")
        shutil.copytree(other / "part1", folder / "part1")
    else:
        folder = partition_graph(data, tmp_path / "t", num_parts=3)
    cmd, env = _torchrun(folder, tmp_path / "runs", "--steps", "4")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 2 and lines[0] == lines[1], proc.stderr[-3000:]   # one per rank
    assert ("part1 comes from another one" if damage.startswith("part")
            else "a partition into 2 part(s)") in lines[0]
    # the only traceback is torchrun's own report of a failed child, no frame of ours
    assert "gnnprivacy/" not in proc.stderr.replace(str(folder), "")
    assert proc.stderr.count("Traceback") == proc.stderr.count("ChildFailedError:")
    assert _records(tmp_path / "runs") == []
