"""Sweep files, grid expansion, seeds, deterministic run ids, failures and bad input."""

import os

import numpy as np
import pytest

from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.records.store import ResultStore
from gnnprivacy.experiments.sweep import SweepSpec, expand_sweep, load_sweep, run_id_for, run_sweep


SMALL_GRAPH = "num_nodes=200,num_features=16,num_classes=3,avg_degree=6"


def probe_spec(probe_module, **overrides):
    data = {"name": "probe", "imports": [probe_module],
            "base": {"method": "sweep-probe", "dataset": "csbm", "dataset_args": SMALL_GRAPH},
            "grid": {"lr": [0.1, 0.5], "steps": [5, 10]}, "seeds": 3, "seed": 11}
    data.update(overrides)
    return SweepSpec.from_dict(data)


def test_grid_is_cartesian_product_times_seeds(probe_module, tmp_path):
    tasks = expand_sweep(probe_spec(probe_module), runs_dir=tmp_path)
    assert len(tasks) == 2 * 2 * 3
    cells = {(t.values["lr"], t.values["steps"]) for t in tasks}
    assert cells == {(0.1, 5), (0.1, 10), (0.5, 5), (0.5, 10)}
    assert len({t.run_id for t in tasks}) == len(tasks)


def test_repeat_k_has_the_same_seed_in_every_cell(probe_module, tmp_path):
    tasks = expand_sweep(probe_spec(probe_module), runs_dir=tmp_path)
    expected = [int(c.generate_state(1, dtype=np.uint32)[0]) for c in np.random.SeedSequence(11).spawn(3)]
    by_repeat = {}
    for t in tasks:
        by_repeat.setdefault(t.repeat, set()).add(t.values["seed"])
    assert [by_repeat[k] for k in range(3)] == [{s} for s in expected]
    assert len(set(expected)) == 3
    other = expand_sweep(probe_spec(probe_module, seed=12), runs_dir=tmp_path)
    assert {t.values["seed"] for t in other}.isdisjoint(expected)


def test_explicit_seeds_in_the_grid(probe_module, tmp_path):
    spec = probe_spec(probe_module, grid={"seed": [1, 2, 3]}, seeds=None)
    assert sorted(t.values["seed"] for t in expand_sweep(spec, runs_dir=tmp_path)) == [1, 2, 3]
    with pytest.raises(InvalidParameterError, match="seeds"):
        probe_spec(probe_module, grid={"seed": [1, 2]}, seeds=2)


def test_mapping_elements_set_several_keys_together(probe_module, tmp_path):
    spec = probe_spec(probe_module, grid={"setting": [{"lr": 0.1, "steps": 3}, {"lr": 0.2, "steps": 4}]}, seeds=1)
    assert sorted((t.values["lr"], t.values["steps"]) for t in expand_sweep(spec, runs_dir=tmp_path)) == [
        (0.1, 3), (0.2, 4)]


def test_run_id_is_a_hash_of_the_resolved_config(probe_module, tmp_path):
    a = expand_sweep(probe_spec(probe_module), runs_dir=tmp_path / "a")
    b = expand_sweep(probe_spec(probe_module), runs_dir=tmp_path / "b", data_root=str(tmp_path))
    assert [t.run_id for t in a] == [t.run_id for t in b]  # locations do not change the id
    resolved = dict(a[0].values)
    assert run_id_for(resolved) == a[0].run_id
    assert run_id_for({**resolved, "lr": float(resolved["lr"]) * 2}) != a[0].run_id
    assert run_id_for({**resolved, "steps": 5.0}) == run_id_for({**resolved, "steps": 5})
    assert a[0].run_id.startswith("sweep-probe-csbm-")


def test_sweep_runs_skips_finished_and_records_failures(probe_module, tmp_path):
    runs = tmp_path / "runs"
    spec = probe_spec(probe_module, grid={"fail": [False, True]}, seeds=2)
    first = run_sweep(spec, runs_dir=runs, workers=2)
    assert (first.total, first.skipped, len(first.succeeded), len(first.failed)) == (4, 0, 2, 2), first.failed
    assert all("probe failure requested" in err for _, err in first.failed)
    store = ResultStore(runs)
    assert len(store.record_paths()) == 2 and len(store.failures()) == 2
    assert {f["run_id"] for f in store.failures()} == {rid for rid, _ in first.failed}
    assert all(store.load(rid).config["runs_dir"] == str(runs) for rid in first.succeeded)
    second = run_sweep(spec, runs_dir=runs, workers=1)
    assert second.skipped == 2 and len(second.failed) == 2 and not second.succeeded
    assert not any((runs / ".claims").iterdir())  # every claim was released


def test_load_sweep_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ngrid: {lr: [1, 2}\n")
    with pytest.raises(InvalidParameterError, match="valid YAML"):
        load_sweep(bad)
    with pytest.raises(InvalidParameterError, match="existing sweep YAML"):
        load_sweep(tmp_path / "missing.yaml")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("name: x\ngrid: {lr: [1]}\nrepeats: 3\n")
    with pytest.raises(UnknownNameError, match="repeats") as err:
        load_sweep(unknown)
    assert "seeds" in str(err.value)


@pytest.mark.parametrize("grid, match", [
    (None, "non-empty mapping"), ({}, "non-empty mapping"), ({"lr": []}, "non-empty list"),
    ({"lr": 0.1}, "a list of values")])
def test_empty_or_malformed_grid_is_rejected(grid, match):
    data = {"name": "x", "base": {"method": "gcn"}}
    if grid is not None:
        data["grid"] = grid
    with pytest.raises(InvalidParameterError, match=match):
        SweepSpec.from_dict(data)


def test_other_spec_errors():
    with pytest.raises(InvalidParameterError, match="not also set in base"):
        SweepSpec.from_dict({"name": "x", "base": {"lr": 1}, "grid": {"lr": [1, 2]}})
    with pytest.raises(InvalidParameterError, match="runs"):
        SweepSpec.from_dict({"name": "x", "base": {"runs_dir": "r"}, "grid": {"lr": [1]}})
    with pytest.raises(InvalidParameterError, match="name"):
        SweepSpec.from_dict({"name": "../evil", "grid": {"lr": [1]}})
    with pytest.raises(InvalidParameterError, match="seeds"):
        SweepSpec.from_dict({"name": "x", "grid": {"lr": [1]}, "seeds": 0})


def test_unknown_config_key_fails_before_anything_is_written(probe_module, tmp_path):
    runs = tmp_path / "runs"
    spec = probe_spec(probe_module, grid={"lr": [0.1], "bogus_key": [1]})
    with pytest.raises(UnknownNameError) as err:
        run_sweep(spec, runs_dir=runs)
    assert "bogus_key" in str(err.value) and "steps" in str(err.value) and "dataset" in str(err.value)
    assert not runs.exists()
    with pytest.raises(InvalidParameterError, match="steps"):
        run_sweep(probe_spec(probe_module, grid={"steps": [0]}), runs_dir=runs)
    assert not runs.exists()


def test_runs_dir_not_writable_is_a_clear_error(probe_module, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(InvalidParameterError, match="writable directory"):
        run_sweep(probe_spec(probe_module), runs_dir=blocker / "runs")
    if os.geteuid() != 0:  # root ignores permission bits
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(InvalidParameterError, match="writable directory"):
            run_sweep(probe_spec(probe_module), runs_dir=ro)
        assert list(ro.iterdir()) == []


def test_unknown_executor_and_missing_import(probe_module, tmp_path):
    with pytest.raises(UnknownNameError, match="local"):
        run_sweep(probe_spec(probe_module), runs_dir=tmp_path / "r", executor="dask")
    with pytest.raises(InvalidParameterError, match="imports"):
        expand_sweep(probe_spec(probe_module, imports=["no_such_module_xyz"]), runs_dir=tmp_path)
    assert not (tmp_path / "r").exists()
