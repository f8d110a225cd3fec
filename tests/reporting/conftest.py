"""Fixtures for the reporting tests: synthetic run records (no training)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gnnprivacy.records.record import RunRecord


def write_record(runs_dir, *, method: str, dataset: str, seed: int, acc: float, run_id: str | None = None,
                 **config) -> RunRecord:
    """Write one synthetic record as the runner would (private iff ``epsilon`` is configured)."""
    private = "epsilon" in config or "eps_x" in config
    cfg = {"method": method, "dataset": dataset, "seed": seed, "split_seed": None,
           "runs_dir": str(runs_dir), "data_root": None, "device": "cpu", **config}
    key = "-".join(f"{k}{v}" for k, v in sorted(config.items()))
    record = RunRecord(
        run_id=run_id or f"{method}-{dataset}-{key}-s{seed}", method=method, dataset=dataset, config=cfg,
        seeds={"run": seed, "split": seed},
        epsilon=float(config.get("epsilon", config.get("eps_x", 0) + config.get("eps_y", 0))) if private else math.inf,
        delta=1e-5 if "epsilon" in config else None, privacy={"private": private},
        metrics={"test_accuracy": acc, "val_accuracy": acc}, timings={"total_seconds": 0.5},
        versions={}, git_commit=None)
    record.save(runs_dir)
    return record


@pytest.fixture
def table2_runs(tmp_path):
    """Records shaped like a 000-table2 reproduction: heterpoisson/dpmlp x 2 datasets x 2 eps x 3 seeds,
    plus a non-private gcn; accuracies drawn around known means (returned)."""
    rng = np.random.default_rng(7)
    runs = tmp_path / "runs"
    means = {}
    for dataset, base in (("computers", 0.80), ("facebook", 0.74)):
        for eps in (4.0, 16.0):
            for method, extra, mean in (("heterpoisson", {"backbone": "gcn"}, base + eps / 400),
                                        ("dpmlp", {"preset": "paper"}, 0.40)):  # the paper's naive DP-SGD
                means[(dataset, method, eps)] = mean
                for seed in range(3):
                    write_record(runs, method=method, dataset=dataset, seed=seed,
                                 acc=float(mean + rng.normal(0, 0.01)), epsilon=eps, **extra)
        for seed in range(3):
            write_record(runs, method="gcn", dataset=dataset, seed=seed, acc=float(0.9 + rng.normal(0, 0.01)))
    return runs, means


@pytest.fixture
def write_run():
    """`write_record`, for tests that build their own runs directory."""
    return write_record
