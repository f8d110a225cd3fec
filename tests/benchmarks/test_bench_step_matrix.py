"""benchmarks/bench_step_matrix.py runs: a tiny subset of its matrix (every node-level model at
16 features and 100 subgraphs, the Opacus row on csbm) writes one cell per model with both
step times and their ratio, and the summary names the worst cell."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_step_matrix as bench  # noqa: E402


def test_quick_subset_writes_every_cell(tmp_path, capsys):
    out = tmp_path / "matrix.json"
    bench.main(["--quick", "--part", "nodes,opacus", "--out", str(out)])
    saved = json.loads(out.read_text())
    cells = saved["cells"]
    assert [c["module"] for c in cells] == [label for label, _ in bench.MODULES.values()]
    for c in cells:
        assert (c["features"], c["subgraphs"]) == (16, 100)
        assert c["dp_ms"] > 0 and c["plain_ms"] > 0
        assert c["ratio"] == pytest.approx(c["dp_ms"] / c["plain_ms"])
        assert not c["fallback"]                # every model on its rules
    worst = max(cells, key=lambda c: c["ratio"] / c["target"])
    assert saved["worst"]["module"] == worst["module"]
    (row,) = saved["opacus"]
    assert row["dataset"] == "csbm" and row["ours_ms"] > 0 and row["opacus_ghost_ms"] > 0
    printed = capsys.readouterr().out
    assert "worst cell:" in printed and "median of the node cells" in printed


def test_an_unknown_module_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--quick", "--modules", "gcn,transformer"])
    assert exit_.value.code == 2
    assert "transformer" in capsys.readouterr().err
