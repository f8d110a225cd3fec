"""The same sweep through the `local` process pool and through Ray gives identical results."""

import pytest

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.experiments.executors import LocalExecutor, default_threads, make_executor
from gnnprivacy.records.store import ResultStore
from gnnprivacy.experiments.sweep import SweepSpec, run_sweep


def _metrics(runs):
    return {r.run_id: (r.metrics, r.config, r.seeds) for r in ResultStore(runs).records()}


def test_local_and_ray_give_identical_metrics_for_identical_seeds(probe_base, probe_module, tmp_path):
    pytest.importorskip("ray")
    spec = SweepSpec.from_dict({"name": "exec", "imports": [probe_module], "base": probe_base,
                                "grid": {"lr": [0.1, 0.5]}, "seeds": 2, "seed": 3})
    local = run_sweep(spec, runs_dir=tmp_path / "local", executor="local", workers=2)
    ray = run_sweep(spec, runs_dir=tmp_path / "ray", executor="ray", workers=2)
    assert local.ok and ray.ok and len(local.succeeded) == len(ray.succeeded) == 4
    a, b = _metrics(tmp_path / "local"), _metrics(tmp_path / "ray")
    assert set(a) == set(b) and len(a) == 4
    for run_id in a:
        metrics_a, config_a, seeds_a = a[run_id]
        metrics_b, config_b, seeds_b = b[run_id]
        assert metrics_a == metrics_b  # bit-identical floats
        assert seeds_a == seeds_b
        assert {k: v for k, v in config_a.items() if k != "runs_dir"} == {
            k: v for k, v in config_b.items() if k != "runs_dir"}
    # Positive control: the comparison is not vacuous, the two seeds of a cell differ.
    by_cell = {}
    for metrics, config, _ in a.values():
        by_cell.setdefault(config["lr"], []).append(metrics["train_loss"])
    assert all(len(set(losses)) == 2 for losses in by_cell.values())


def test_executor_settings():
    ex = LocalExecutor(workers=2)
    assert ex.workers == 2 and ex.threads_per_worker == default_threads(2) >= 1
    assert "workers=2" in repr(ex)
    with pytest.raises(InvalidParameterError, match="workers"):
        LocalExecutor(workers=0)
    with pytest.raises(InvalidParameterError, match="address"):
        make_executor("local", address="ray://host:10001")
    with pytest.raises(RuntimeError, match="with"):
        next(ex.imap_unordered(abs, [1]))


def test_ray_executor_settings():
    pytest.importorskip("ray")
    from gnnprivacy.experiments.executors import RayExecutor

    local = RayExecutor(workers=2)
    assert local.max_in_flight == 2 and local.threads_per_worker == default_threads(2)
    cluster = RayExecutor(address="ray://head:10001")  # nothing connects before start()
    assert cluster.max_in_flight is None and cluster.threads_per_worker == 1
    assert RayExecutor(address="ray://head:10001", workers=3).max_in_flight == 3


def test_workers_are_spawned_not_forked_where_cuda_is_present(monkeypatch):
    """A fork server that imported torch and PyG has initialised the CUDA driver on a GPU
    machine, and workers forked from it failed every run ("CUDA error: initialization error",
    seen on an H200): with CUDA present the workers are spawned. Control: without CUDA the
    fork server stays (where the platform has one)."""
    import multiprocessing

    import torch

    from gnnprivacy.experiments.executors import _process_context

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _process_context().get_start_method() == "spawn"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    want = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    assert _process_context().get_start_method() == want
