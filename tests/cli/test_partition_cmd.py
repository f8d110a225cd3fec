"""``gnnprivacy partition``: shards of a streamed graph or a named dataset, errors in one line."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

import gnnprivacy as gp
from gnnprivacy.cli import main
from gnnprivacy.datasets.shards import open_shard
from gnnprivacy.datasets.stream import generate_large_graph
from gnnprivacy.errors import InvalidParameterError


def test_partition_a_streamed_graph(tmp_path):
    graph = generate_large_graph(tmp_path / "g", num_nodes=1500, num_features=4, seed=0,
                                 chunk_nodes=512)
    out = CliRunner().invoke(main, ["partition", str(graph), "--parts", "2", "--out",
                                    str(tmp_path / "s"), "--method", "contiguous",
                                    "--train-fraction", "0.2"])
    assert out.exit_code == 0, out.output
    assert "1500 nodes" in out.output and "2 parts (contiguous)" in out.output
    parts = [open_shard(tmp_path / "s", k) for k in range(2)]
    assert [p.nodes.size for p in parts] == [750, 750]
    assert parts[0].meta["train_fraction"] == 0.2
    again = CliRunner().invoke(main, ["partition", str(graph), "--parts", "2", "--out",
                                      str(tmp_path / "s")])
    assert again.exit_code == 2 and "overwrite" in again.output
    assert "Traceback" not in again.output


def test_the_api_function_is_the_cli_path(tmp_path):
    folder = gp.partition("csbm", tmp_path / "s", parts=3, method="metis")   # --parts's alias
    shard = open_shard(folder, 2)
    assert shard.meta["method"] == "metis" and sum(shard.meta["part_sizes"]) == shard.num_nodes
    assert np.asarray(shard.train_mask).sum() == shard.meta["num_train"] > 0


def _partition(*args):
    return CliRunner().invoke(main, ["partition", *map(str, args)])


def test_overwrite_replaces_only_what_a_partition_wrote(tmp_path):
    out = tmp_path / "s"
    assert _partition("csbm", "--parts", "3", "--out", out).exit_code == 0
    (out / "notes.txt").write_text("mine")
    (out / "mine").mkdir()
    (out / "mine" / "a.txt").write_text("mine too")
    (out / "part2" / "keep.txt").write_text("in an old part folder")
    done = _partition("csbm", "--parts", "2", "--out", out, "--overwrite")
    assert done.exit_code == 0, done.output
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "mine" / "a.txt").read_text() == "mine too"
    assert (out / "part2" / "keep.txt").exists()               # the user's file stays ...
    assert not (out / "part2" / "x.npy").exists()              # ... the old part's files go
    assert [open_shard(out, k).num_parts for k in range(2)] == [2, 2]
    assert not list(out.glob(".*.tmp")) and not list(tmp_path.glob(".*.tmp"))
    # broken control: a plain rmtree of the folder (the old writer) loses the user's files
    import shutil

    shutil.rmtree(out)
    assert not (tmp_path / "s" / "notes.txt").exists()


def test_files_no_partition_wrote_are_refused(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    np.save(out / "owner.npy", np.zeros(3))                    # the user's own owner.npy
    for flags in ([], ["--overwrite"]):
        done = _partition("csbm", "--parts", "2", "--out", out, *flags)
        assert done.exit_code == 2 and "owner.npy that gnnprivacy did not write" in done.output
    assert np.load(out / "owner.npy").shape == (3,)
    (out / "owner.npy").unlink()
    (out / "meta.json").write_text("{not json")                # a garbage meta.json
    done = _partition("csbm", "--parts", "2", "--out", out, "--overwrite")
    assert done.exit_code == 2 and "its meta.json is not one" in done.output
    assert (out / "meta.json").read_text() == "{not json"
    gone = _partition("./no/such/folder", "--parts", "2", "--out", tmp_path / "t")
    assert gone.exit_code == 2 and "./no/such/folder (no such folder)" in gone.output
    assert "csbm" not in gone.output.split("received")[1]      # not a list of dataset names


@pytest.fixture
def small_disk(tmp_path):
    import subprocess

    target = tmp_path / "small"
    target.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs",
                                           str(target)], capture_output=True).returncode:
        pytest.skip("cannot mount a test filesystem here (needs root on Linux)")
    yield target
    subprocess.run(["umount", "-l", str(target)], capture_output=True)


def test_a_full_disk_leaves_nothing_half_written(small_disk):
    """A real full disk (a 256 KiB tmpfs filled to leave every 16 KiB step of room): exit 1
    with one line, or complete shards; never a Bus error or a half-written folder; an
    existing partition being replaced stays whole when the new one does not fit."""
    outcomes = set()
    for free_kib in range(0, 256, 16):
        for entry in small_disk.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        try:
            (small_disk / "filler").write_bytes(b"\0" * ((256 - free_kib) * 1024))
        except OSError:
            pass
        done = _partition("csbm", "--dataset-args", "num_nodes=200", "--parts", "2", "--out",
                          small_disk / "s")
        leftovers = [p for p in small_disk.rglob("*") if p.name.endswith(".tmp")]
        assert not leftovers, leftovers
        if done.exit_code == 0:
            outcomes.add("written")
            assert [open_shard(small_disk / "s", k).part for k in range(2)] == [0, 1]
        else:
            errors = [line for line in done.output.splitlines() if line.startswith("Error:")]
            assert done.exit_code == 1 and len(errors) == 1, done.output
            assert "No space left on device" in errors[0] and "Traceback" not in done.output
            assert not (small_disk / "s").exists()
            outcomes.add("refused")
    assert outcomes == {"written", "refused"}
    # an existing partition, replaced on a disk too full for the new one, is kept whole
    for entry in small_disk.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    assert _partition("csbm", "--dataset-args", "num_nodes=200", "--parts", "2", "--out",
                      small_disk / "s").exit_code == 0
    (small_disk / "filler").write_bytes(b"\0" * (64 * 1024))   # about 60 KiB left
    done = _partition("csbm", "--dataset-args", "num_nodes=400", "--parts", "3", "--out",
                      small_disk / "s", "--overwrite")
    assert done.exit_code == 1 and "No space left on device" in done.output
    assert [open_shard(small_disk / "s", k).num_nodes for k in range(2)] == [200, 200]


def test_a_named_dataset_takes_trains_split_options(tmp_path):
    from gnnprivacy.datasets import load_dataset

    done = _partition("csbm", "--parts", "2", "--out", tmp_path / "s", "--seed", "3",
                      "--train-frac", "0.3", "--test-frac", "0.4")
    assert done.exit_code == 0, done.output
    data = load_dataset("csbm", seed=3, train_frac=0.3, test_frac=0.4)   # what train loads
    shard = open_shard(tmp_path / "s", 0)
    assert np.array_equal(np.asarray(shard.train_mask), data.train_mask.numpy())
    assert np.array_equal(np.asarray(shard.masks["test_mask"]), data.test_mask.numpy())
    assert np.array_equal(np.asarray(shard.masks["val_mask"]), data.val_mask.numpy())
    # options that do not apply are refused, not ignored
    for args, name in ((["csbm", "--train-fraction", "0.2"], "train_fraction"),
                       (["csbm", "--split", "inductive"], "split")):
        bad = _partition(*args, "--parts", "2", "--out", tmp_path / "t")
        assert bad.exit_code == 2 and f"'{name}'" in bad.output, bad.output
    graph = generate_large_graph(tmp_path / "g", num_nodes=300, num_features=4, seed=0)
    bad = _partition(graph, "--parts", "2", "--out", tmp_path / "u", "--test-frac", "0.5")
    assert bad.exit_code == 2 and "'test_frac'" in bad.output


def test_num_parts_is_the_documented_name(tmp_path):
    folder = gp.partition("csbm", tmp_path / "a", num_parts=2)
    assert open_shard(folder, 1).num_parts == 2
    with pytest.raises(InvalidParameterError, match="given once"):
        gp.partition("csbm", tmp_path / "b", num_parts=2, parts=2)
    with pytest.raises(InvalidParameterError, match="given once"):
        gp.partition("csbm", tmp_path / "c")
