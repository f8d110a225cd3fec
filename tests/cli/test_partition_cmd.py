"""``gnnprivacy partition``: shards of a streamed graph or a named dataset, errors in one line."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

import gnnprivacy as gp
from gnnprivacy.cli import main
from gnnprivacy.datasets.shards import open_shard
from gnnprivacy.datasets.stream import generate_large_graph


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
    folder = gp.partition("csbm", tmp_path / "s", parts=3, method="metis")
    shard = open_shard(folder, 2)
    assert shard.meta["method"] == "metis" and sum(shard.meta["part_sizes"]) == shard.num_nodes
    assert np.asarray(shard.train_mask).sum() == shard.meta["num_train"] > 0
