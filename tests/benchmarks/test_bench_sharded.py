"""benchmarks/bench_sharded.py on a small graph: every accepted quantity is measured and holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_sharded as bench  # noqa: E402


def test_a_small_run_reports_equal_parameters_ledgers_and_bytes(tmp_path, capsys):
    out = tmp_path / "r.json"
    bench.main(["--world-size", "2", "--num-nodes", "4000", "--steps", "4", "--batch", "300",
                "--features", "8", "--workdir", str(tmp_path / "w"), "--out", str(out)])
    r = json.loads(out.read_text())
    assert r["ledgers_equal"] and r["ranks_agree"]
    assert r["max_rel_param_diff"] < 1e-5
    assert r["remote_rows_per_step"] > 0 and 1.0 <= r["bytes_ratio"] <= 2.0
    assert r["single_rss_gib"] > 0 and len(r["rank_rss_gib"]) == 2
    assert r["single_steps_per_s"] > 0 and r["sharded_steps_per_s"] > 0
    assert "bytes exchanged per step" in capsys.readouterr().out
