"""benchmarks/bench_loop_guard.py runs (it crashed once the guard's state reads took the model's
module list, and no test ran it): a few steps on a small csbm graph print the check's cost per
step against a plain step and the first step's cost in plain steps."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_loop_guard as bench  # noqa: E402


def test_a_few_steps_print_the_checks_cost(capsys):
    out = bench.main(["--dataset", "csbm", "--steps", "4", "--hidden", "8"])
    printed = capsys.readouterr().out
    assert "the check's cost per step" in printed and "first (fully checked) step" in printed
    assert out["plain_ms"] > 0 and out["first_s"] > 0
    assert out["first_plain_steps"] == pytest.approx(out["first_s"] * 1e3 / out["plain_ms"])
