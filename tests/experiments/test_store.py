"""The results store: records, index cache, failures, filters, concurrent writers, exports."""

import json
import math
import multiprocessing
import os

import pytest

from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.records.store import ResultStore, filter_rows, flatten_record, parse_filter
from gnnprivacy.reporting import export
from gnnprivacy.records.record import RunRecord, write_json_atomic


def make_record(run_id: str, *, method="gcn", dataset="csbm", seed=0, acc=0.5, spent=math.inf, **config):
    cfg = {"method": method, "dataset": dataset, "seed": seed, "runs_dir": "x", **config}
    return RunRecord(run_id=run_id, method=method, dataset=dataset, config=cfg, seeds={"run": seed, "split": seed},
                     epsilon=spent, delta=None if math.isinf(spent) else 1e-5,
                     privacy={"private": not math.isinf(spent), "ledger": [{"event": "x"}]},
                     metrics={"test_accuracy": acc}, timings={"total_seconds": 1.0}, versions={}, git_commit=None)


def test_flatten_namespaces_config_metrics_and_privacy():
    rec = make_record("r1", method="heterpoisson", spent=7.9, acc=0.8, lr=0.01).to_dict()
    row = flatten_record(rec)
    assert row["epsilon"] == 7.9 and row["metrics.test_accuracy"] == 0.8 and row["config.lr"] == 0.01
    assert row["privacy.private"] is True and "privacy.ledger" not in row  # non-scalars left out
    assert row["status"] == "ok" and row["seed"] == 0


def test_only_finished_records_are_listed(tmp_path):
    store = ResultStore(tmp_path)
    make_record("a").save(tmp_path)
    make_record("b").save(tmp_path)
    (tmp_path / ".a.json.123.tmp").write_text("{partial")          # a killed atomic write
    (tmp_path / "c.failed.json").write_text(json.dumps({"run_id": "c", "error": "boom", "config": {}}))
    (tmp_path / "a.split.npz").write_bytes(b"")
    assert store.completed_ids() == {"a", "b"}
    assert [r["run_id"] for r in store.rows()] == ["a", "b"]
    assert [r["run_id"] for r in store.rows(include_failed=True)] == ["a", "b", "c"]
    assert store.failures()[0]["error"] == "boom"
    make_record("c").save(tmp_path)  # a later success hides the old failure
    assert store.failures() == []


def test_index_cache_is_reused_and_invalidated(tmp_path):
    store = ResultStore(tmp_path)
    make_record("a", acc=0.5).save(tmp_path)
    assert store.rows()[0]["metrics.test_accuracy"] == 0.5
    cache = json.loads((tmp_path / ".index.json").read_text())
    assert set(cache["entries"]) == {"a.json"}
    # A hand-edited row fails its checksum: the record is read again (issue 35) ...
    from gnnprivacy.records.store import UnreadableRecordWarning, _entry_digest

    cache["entries"]["a.json"]["row"]["metrics.test_accuracy"] = 0.25
    (tmp_path / ".index.json").write_text(json.dumps(cache))
    with pytest.warns(UnreadableRecordWarning, match="failed its checksum"):
        assert store.rows()[0]["metrics.test_accuracy"] == 0.5
    # ... a cached row is served while the file is unchanged (tamper with the cache, checksum
    # recomputed, to prove it) ...
    cache["entries"]["a.json"]["sha256"] = _entry_digest("a.json", cache["entries"]["a.json"])
    (tmp_path / ".index.json").write_text(json.dumps(cache))
    assert store.rows()[0]["metrics.test_accuracy"] == 0.25
    # ... and re-parsed once the record changes.
    rec = make_record("a", acc=0.75)
    write_json_atomic(tmp_path / "a.json", {**rec.to_dict(), "info": {"pad": "x" * 10}})
    assert store.rows()[0]["metrics.test_accuracy"] == 0.75
    (tmp_path / ".index.json").write_text("garbage")  # a corrupt cache is rebuilt
    assert store.rows()[0]["metrics.test_accuracy"] == 0.75


def test_failure_records_and_commit(tmp_path):
    store = ResultStore(tmp_path / "runs")
    store.ensure_writable()
    try:
        raise ValueError("bad value")
    except ValueError as exc:
        store.write_failure("r1", {"method": "gcn"}, exc)
    assert store.failures()[0]["error"] == "ValueError: bad value"
    assert "Traceback" in store.failures()[0]["traceback"]
    staging = store.staging_dir("r1")
    (staging / "r1.split.npz").write_bytes(b"split")
    store.commit(make_record("r1"), staging)
    assert store.completed_ids() == {"r1"} and store.failures() == []
    assert (tmp_path / "runs" / "r1.split.npz").read_bytes() == b"split"
    assert not (tmp_path / "runs" / "r1.failed.json").exists()


def _abandon_staging(root):
    return str(ResultStore(root).staging_dir("abandoned"))  # the process exits holding the lock


def test_stale_staging_of_dead_processes_is_removed(tmp_path):
    store = ResultStore(tmp_path)
    live = store.staging_dir("live")
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        dead = pool.apply(_abandon_staging, (str(tmp_path),))
    unlocked_old = tmp_path / ".staging" / "old.host.1.x"
    unlocked_new = tmp_path / ".staging" / "new.host.1.x"
    unlocked_old.mkdir()
    unlocked_new.mkdir()
    os.utime(unlocked_old, (0, 0))
    assert os.path.isdir(dead)
    assert store.clean_stale_staging() == 2
    assert live.exists() and unlocked_new.exists() and not os.path.exists(dead) and not unlocked_old.exists()
    store.release_staging(live)
    assert not live.exists()


def _writer(args):
    root, worker, count = args
    store = ResultStore(root)
    for i in range(count):
        rid = f"w{worker}-{i}"
        staging = store.staging_dir(rid)
        store.commit(make_record(rid, seed=i, acc=i / count), staging)
        store.release_staging(staging)
        store.rows()  # readers race with writers on the index cache
    return count


def test_many_concurrent_writers_lose_nothing(tmp_path):
    n_workers, per_worker = 4, 15
    with multiprocessing.get_context("spawn").Pool(n_workers) as pool:
        assert sum(pool.map(_writer, [(str(tmp_path), w, per_worker) for w in range(n_workers)])) == 60
    store = ResultStore(tmp_path)
    rows = store.rows()
    assert len(rows) == n_workers * per_worker == len({r["run_id"] for r in rows})
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_filters(tmp_path):
    for i, (method, eps, lr) in enumerate([("gcn", math.inf, 0.01), ("dpgnn", 7.99, 0.01), ("dpgnn", 4.0, 0.1)]):
        make_record(f"r{i}", method=method, spent=eps, lr=lr,
                    **({"epsilon": 8 if eps > 5 else 4} if method == "dpgnn" else {})).save(tmp_path)
    rows = ResultStore(tmp_path).rows()
    assert [r["run_id"] for r in filter_rows(rows, ["method=dpgnn"])] == ["r1", "r2"]
    assert [r["run_id"] for r in filter_rows(rows, ["config.epsilon=8"])] == ["r1"]  # target
    assert [r["run_id"] for r in filter_rows(rows, ["epsilon=4"])] == ["r2"]  # spent
    assert [r["run_id"] for r in filter_rows(rows, ["lr=0.01", "method=dpgnn"])] == ["r1"]  # bare config key
    assert filter_rows(rows, ["test_accuracy=0.5"]) == rows  # bare metric key
    assert filter_rows(rows, []) == rows
    with pytest.raises(UnknownNameError, match="nope") as err:
        filter_rows(rows, ["nope=1"])
    assert "config.lr" in str(err.value)
    with pytest.raises(InvalidParameterError, match="KEY=VALUE"):
        filter_rows(rows, ["method"])
    assert parse_filter("flag=true") == ("flag", True) and parse_filter("name=a=b") == ("name", "a=b")


def test_exports(tmp_path):
    make_record("a", acc=0.5).save(tmp_path)
    make_record("b", method="dpgnn", spent=3.0, acc=0.25, lr=0.1).save(tmp_path)
    rows = ResultStore(tmp_path).rows()
    csv_text = export.to_csv(rows)
    header = csv_text.splitlines()[0].split(",")
    assert header[:4] == ["run_id", "status", "method", "dataset"] and "config.lr" in header
    assert len(csv_text.splitlines()) == 3 and ",inf," in csv_text
    back = json.loads(export.to_json(rows))
    assert back[0]["epsilon"] == "inf" and back[1]["metrics.test_accuracy"] == 0.25
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(export.write_parquet(rows, tmp_path / "out.parquet"))
    assert table.num_rows == 2 and table.column("metrics.test_accuracy").to_pylist() == [0.5, 0.25]


def test_results_command(tmp_path):
    from click.testing import CliRunner

    from gnnprivacy.cli.results_cmd import results_command

    make_record("a", acc=0.5).save(tmp_path)
    make_record("b", method="dpgnn", spent=3.0, acc=0.25).save(tmp_path)
    runner = CliRunner()
    out = runner.invoke(results_command, [str(tmp_path), "--filter", "method=dpgnn"])
    assert out.exit_code == 0, out.output
    assert "b" in out.output and "dpgnn" in out.output and "gcn" not in out.output
    out = runner.invoke(results_command, [str(tmp_path), "--format", "json"])
    assert [r["run_id"] for r in json.loads(out.output)] == ["a", "b"]
    out = runner.invoke(results_command, [str(tmp_path), "--format", "csv", "-o", str(tmp_path / "x.csv")])
    assert out.exit_code == 0 and (tmp_path / "x.csv").read_text().startswith("run_id,")
    out = runner.invoke(results_command, [str(tmp_path), "--format", "parquet"])
    assert out.exit_code != 0 and "-o FILE" in out.output
    out = runner.invoke(results_command, [str(tmp_path), "-f", "bogus=1"])
    assert out.exit_code == 1 and "bogus" in out.output and "method" in out.output


def test_truncated_record_is_skipped_with_a_warning_and_rerun_by_a_sweep(probe_base, probe_module, tmp_path):
    import warnings

    from gnnprivacy.records.store import UnreadableRecordWarning
    from gnnprivacy.experiments.sweep import SweepSpec, execute_task, expand_sweep

    spec = SweepSpec.from_dict({"name": "t", "imports": [probe_module], "base": probe_base, "grid": {"lr": [0.1]}})
    (task,) = expand_sweep(spec, runs_dir=tmp_path)
    assert execute_task(task).status == "ok"
    path = tmp_path / f"{task.run_id}.json"
    path.write_text(path.read_text()[:100])  # truncated (disk full, killed editor ...)
    store = ResultStore(tmp_path)
    with pytest.warns(UnreadableRecordWarning, match=str(path)):
        assert store.completed_ids() == set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert store.rows() == [] and store.skipped and store.skipped[0][0] == str(path)
    outcome = execute_task(task)  # the sweep redoes it instead of counting it finished
    assert outcome.status == "ok" and store.completed_ids() == {task.run_id}


def test_runs_dir_is_checked_before_training(tmp_path):
    from gnnprivacy.method.runner import run
    from gnnprivacy.records.store import check_runs_dir

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InvalidParameterError, match="runs_dir.*an existing file"):
        check_runs_dir(blocker)
    calls = []
    from gnnprivacy.method import runner

    original = runner.load_run_data
    runner.load_run_data = lambda config: calls.append(config) or original(config)
    try:
        with pytest.raises(InvalidParameterError, match="runs_dir"):
            run({"method": "gcn", "dataset": "csbm", "runs_dir": str(blocker / "sub")})
    finally:
        runner.load_run_data = original
    assert calls == []  # refused before loading data or training
    assert check_runs_dir(tmp_path / "new" / "dir").is_dir()


def test_unlocked_staging_folder_of_a_dead_process_is_cleaned_at_once(tmp_path):
    """A worker SIGKILLed between mkdir and locking leaves a folder without .lock: its pid
    (in the name) is gone, so the restart cleans it without waiting for the grace period."""
    import socket
    import subprocess
    import sys

    from gnnprivacy.records.store import STAGING_DIR, ResultStore

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    host = socket.gethostname()
    base = tmp_path / STAGING_DIR
    (base / f"r1.{host}.{dead}.abcd1234").mkdir(parents=True)           # owner gone
    (base / f"r2.{host}.{os.getpid()}.abcd1234").mkdir()                 # owner alive (us)
    (base / f"r3.some-other-host.{dead}.abcd1234").mkdir()                # unknown: keep
    assert ResultStore(tmp_path).clean_stale_staging(grace_seconds=3600) == 1
    assert sorted(p.name.split(".")[0] for p in base.iterdir()) == ["r2", "r3"]
