"""Faults (issue 24): a full disk or a read-only folder at each write, signals, damaged caches.

Every test here asserts the same three things after the fault and after the rerun: no finished
run is lost or changed, nothing half-written is listed as finished (every listed record's
companions match its checksums), and no process is left running. Each test is named in the
"Faults" section of ``docs/bad-inputs.md`` (``tests/test_bad_inputs.py`` checks the names).

Full disk / read-only: the writes go through one function (``gnnprivacy._files._write_temp``,
which fills the temporary file of every atomic write); a patched version fails the k-th call
with ``ENOSPC`` or ``EROFS``, for every k of a clean run. Where this machine lets the test mount
a small ``tmpfs`` or a read-only bind mount, the same is checked on a real filesystem.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gnnprivacy import _files
from gnnprivacy.cli import main
from gnnprivacy.errors import Terminated, WriteFailedError
from gnnprivacy.records.store import ResultStore

SMALL = "num_nodes=120,num_features=8,num_classes=3,avg_degree=4"
FAULTS = (errno.ENOSPC, errno.EROFS)


# -- helpers --------------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def private_caches(tmp_path, monkeypatch):
    """No cache shared with other tests or workers: the write-count tests count a clean run's
    writes and then fail each one, so a write that happens only when a shared cache is cold
    (the accounting cache's entry for a calibration) must not come and go with the order in
    which workers run (it did under ``-n 2`` and on a fresh machine: the counted run wrote the
    entry, the later runs found it, the last write never came). The accounting cache is off and
    the dataset cache is the test's own."""
    monkeypatch.setenv("GNNPRIVACY_ACCOUNTING_CACHE", "off")
    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path / "gp-cache"))


@contextlib.contextmanager
def failing_write(monkeypatch, k: int | None, err: int = errno.ENOSPC):
    """Make the ``k``-th write fail with ``err`` (``k=None``: only count); yields the counter."""
    calls = {"n": 0, "failed": None}
    original = _files._write_temp

    def write(handle, data, writer):
        calls["n"] += 1
        if calls["n"] == k:
            calls["failed"] = handle.name
            raise OSError(err, os.strerror(err))
        return original(handle, data, writer)

    monkeypatch.setattr(_files, "_write_temp", write)
    try:
        yield calls
    finally:
        monkeypatch.setattr(_files, "_write_temp", original)


def snapshot(runs: Path) -> dict[str, bytes]:
    """The bytes of every finished run's files (records and their companions)."""
    out = {}
    store = ResultStore(runs)
    for path in store.valid_record_paths():
        out[path.name] = path.read_bytes()
        for name in (json.loads(path.read_text()).get("files") or {}):
            out[name] = (runs / name).read_bytes()
    return out


def assert_nothing_half_written(runs: Path) -> None:
    """No temporary file is left, and every listed record is valid with complete companions."""
    leftovers = [p for p in runs.rglob("*.tmp")] if runs.exists() else []
    assert not leftovers, leftovers
    store = ResultStore(runs)
    listed = store.record_paths()
    valid = store.valid_record_paths()
    assert listed == valid, store.skipped


def invoke(args):
    out = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)
    text = out.output  # stdout and stderr, interleaved
    if out.exception is not None and not isinstance(out.exception, SystemExit):
        import traceback

        text += "".join(traceback.format_exception(out.exception))
    return out.exit_code, text, out.stdout


def one_line_error(text: str) -> str:
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, text
    return errors[0]


# -- a run ---------------------------------------------------------------------------------------

def _train_args(runs, *extra):
    return ["train", "--method", "heterpoisson", "--dataset", "csbm", "--dataset-args", SMALL,
            "--epochs", "2", "-q", "--runs-dir", runs, *extra]


def test_train_write_fault_at_each_write(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    with failing_write(monkeypatch, None) as calls:
        code, text, _ = invoke(_train_args(runs))
    assert code == 0, text
    writes = calls["n"]  # checkpoint description, checkpoint, split, record
    assert writes >= 4
    finished = snapshot(runs)
    for err in FAULTS:
        for k in range(1, writes + 1):
            with failing_write(monkeypatch, k, err) as calls:
                code, text, stdout = invoke(_train_args(runs))
            assert calls["failed"] is not None
            failed_file = Path(calls["failed"]).name
            if code == 0:  # only a checkpoint may fail without failing the run: it warns
                assert ".pt." in failed_file, text
                finished = {**finished, **{k2: v for k2, v in snapshot(runs).items() if k2 not in finished}}
            else:
                line = one_line_error(text)
                assert "could not write" in line and os.strerror(err) in line, line
                if ".split.npz." in failed_file or ("-heterpoisson-csbm-" in failed_file and ".json." in failed_file):
                    printed = json.loads(stdout[stdout.index("{"):])  # the finished run is not lost
                    assert printed["method"] == "heterpoisson" and "test_accuracy" in printed["metrics"]
            assert_nothing_half_written(runs)
            now = snapshot(runs)
            assert all(now[name] == content for name, content in finished.items())  # nothing lost
            assert len(ResultStore(runs).completed_ids()) == len([n for n in now if n.endswith(".json")])
    code, text, _ = invoke(_train_args(runs, "--resume"))  # the rerun publishes
    assert code == 0, text


def test_a_run_whose_record_cannot_be_written_keeps_its_checkpoint_for_resume(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    args = _train_args(runs)
    with failing_write(monkeypatch, None) as calls:
        invoke(_train_args(tmp_path / "count"))
    last = calls["n"]  # the record is the last write
    with failing_write(monkeypatch, last):
        code, text, stdout = invoke(args)
    assert code == 1 and "--resume" in one_line_error(text)
    assert not ResultStore(runs).completed_ids() and list((runs / "checkpoints").glob("*.pt"))
    code, text, stdout = invoke(args + ["--resume"])
    assert code == 0, text
    (record,) = ResultStore(runs).records()
    assert record.info["resumed_from_step"] == record.info["steps"] == 2  # no step trained again
    assert not list((runs / "checkpoints").glob("*.pt"))


def test_concurrent_writes_of_one_path_both_succeed(tmp_path, monkeypatch):
    """Two identical trains share a checkpoint path: a write of it that starts while another is
    under way must not steal its temporary file (the old fixed ``.pt.tmp`` name did)."""
    target = tmp_path / "checkpoints" / "heterpoisson-x.pt"
    original = _files._write_temp
    nested = {"done": False}

    def interleaved(handle, data, writer):
        original(handle, data, writer)
        if not nested["done"]:  # the other process writes the same checkpoint right now
            nested["done"] = True
            _files.atomic_write(target, b"second")

    monkeypatch.setattr(_files, "_write_temp", interleaved)
    _files.atomic_write(target, b"first")
    assert target.read_bytes() == b"first" and not list(target.parent.glob(".*.tmp"))

    def fixed_name_write(path, data):  # broken control: the old scheme, a fixed temporary name
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        if data == b"first":
            fixed_name_write(path, b"second")
        os.replace(tmp, path)

    with pytest.raises(FileNotFoundError):
        fixed_name_write(tmp_path / "control.pt", b"first")


def test_a_record_with_a_damaged_companion_is_not_finished(tmp_path):
    from gnnprivacy.datasets.splits import random_split
    from gnnprivacy.records.record import RunRecord

    runs = tmp_path / "runs"
    store = ResultStore(runs)

    def record(run_id):
        return RunRecord(run_id=run_id, method="gcn", dataset="csbm", config={}, seeds={"run": 0},
                         epsilon=float("inf"), delta=None, privacy={}, metrics={"test_accuracy": 0.5},
                         timings={}, versions={}, git_commit=None)

    split = random_split(30, seed=0, dataset="csbm")
    for run_id in ("whole", "truncated", "changed", "missing"):
        store.publish(record(run_id), {f"{run_id}.split.npz": split.save})
    assert store.completed_ids() == {"whole", "truncated", "changed", "missing"}
    (runs / "truncated.split.npz").write_bytes((runs / "truncated.split.npz").read_bytes()[:50])
    other = random_split(30, seed=1, dataset="csbm")
    other.save(runs / "changed.split.npz")
    (runs / "missing.split.npz").unlink()
    with pytest.warns(UserWarning, match="companion"):
        assert store.completed_ids() == {"whole"}
    assert {Path(p).name for p, _ in store.skipped} == {"truncated.json", "changed.json", "missing.json"}
    # a failed publish removes the companions it wrote: no record, nothing left behind

    def full_disk(path):
        raise WriteFailedError("file", path, OSError(errno.ENOSPC, "No space left on device"))

    with pytest.raises(WriteFailedError):
        store.publish(record("r2"), {"r2.split.npz": split.save, "r2.extra": full_disk})
    assert not (runs / "r2.split.npz").exists() and not (runs / "r2.json").exists()


# -- a sweep -------------------------------------------------------------------------------------

class SerialExecutor:
    """Test double of an executor: every item in this process, so a patched writer applies."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def imap_unordered(self, fn, items):
        for item in items:
            try:
                yield item, fn(item)
            except Exception as exc:  # noqa: BLE001 - as the real executors do
                yield item, exc


def _gcn_sweep(runs):
    from gnnprivacy.experiments.sweep import SweepSpec

    return SweepSpec.from_dict({"name": "faults", "base": {"method": "gcn", "dataset": "csbm",
                                                          "dataset_args": SMALL, "epochs": 2},
                                "grid": {"lr": [0.1, 0.2, 0.3]}})


def test_sweep_write_fault_at_each_write(tmp_path, monkeypatch):
    from gnnprivacy.experiments import executors
    from gnnprivacy.experiments.sweep import expand_sweep, run_sweep

    monkeypatch.setattr(executors, "make_executor", lambda *a, **kw: SerialExecutor())
    spec = _gcn_sweep(tmp_path)
    count_runs = tmp_path / "count"
    with failing_write(monkeypatch, None) as calls:
        assert run_sweep(spec, runs_dir=count_runs).ok
    writes = calls["n"]
    assert writes >= 6  # a split and a record per run, and the index cache
    for err in FAULTS:
        for k in range(1, writes + 1):
            runs = tmp_path / f"runs-{err}-{k}"
            with failing_write(monkeypatch, k, err):
                first = run_sweep(spec, runs_dir=runs)
            assert_nothing_half_written(runs)
            kept = snapshot(runs)
            for _, error in first.failed:
                assert "could not write" in error and os.strerror(err) in error
            assert len(first.succeeded) + len(first.failed) == 3
            again = run_sweep(spec, runs_dir=runs)  # the rerun finishes what the fault stopped
            assert again.ok and again.skipped == len(first.succeeded)
            assert ResultStore(runs).completed_ids() == {t.run_id for t in expand_sweep(spec, runs_dir=runs)}
            assert all(snapshot(runs)[name] == content for name, content in kept.items())


def test_a_claim_on_a_full_disk_fails_the_run_and_leaves_no_claim(tmp_path, monkeypatch):
    from gnnprivacy.records import store as store_module
    from gnnprivacy.experiments.sweep import execute_task, expand_sweep

    class FullDiskOs:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def write(fd, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    (task, *_) = expand_sweep(_gcn_sweep(tmp_path), runs_dir=tmp_path / "runs")
    monkeypatch.setattr(store_module, "os", FullDiskOs())
    outcome = execute_task(task)
    monkeypatch.undo()
    assert outcome.status == "failed" and "could not write the claim" in outcome.error
    assert not list((tmp_path / "runs" / ".claims").glob("*.claim"))
    assert execute_task(task).status == "ok"


# -- a tune --------------------------------------------------------------------------------------

TUNE = {"name": "t", "base": {"method": "dpmlp", "dataset": "csbm", "dataset_args": SMALL, "val_frac": 0.2,
                              "epochs": 1},
        "grid": {"lr": [0.1, 0.3]}, "epsilon": 4.0,
        "trials": {"distribution": "negative_binomial", "mean": 2.0, "eta": 1.0}, "seed": 1, "compare": False,
        "reproducible_selection": True}   # the same trials in every run: the writes are counted


def test_tune_write_fault_at_each_write(tmp_path, monkeypatch):
    config = tmp_path / "t.yaml"
    config.write_text(yaml.safe_dump(TUNE))
    with failing_write(monkeypatch, None) as calls:
        code, text, _ = invoke(["tune", "-c", config, "--runs-dir", tmp_path / "count", "-q"])
    assert code == 0, text
    writes = calls["n"]
    assert writes >= 3
    for err in FAULTS:
        for k in range(1, writes + 1):
            runs = tmp_path / f"runs-{err}-{k}"
            with failing_write(monkeypatch, k, err) as calls:
                code, text, _ = invoke(["tune", "-c", config, "--runs-dir", runs, "-q"])
            failed = Path(calls["failed"]).name
            if code == 0:
                assert ".pt." in failed  # a checkpoint that cannot be written only warns
                continue
            line = one_line_error(text)
            assert "could not write" in line and os.strerror(err) in line
            assert not (runs / "tune-t.json").exists()  # no record: the tune is not finished
            assert not list((runs / ".claims").glob("*.claim"))  # the name is free again
            code, text, _ = invoke(["tune", "-c", config, "--runs-dir", runs])  # the rerun
            assert code == 0, text
            assert (runs / "tune-t.json").exists()
            trials = json.loads((runs / "tune-t.json").read_text())["internal"]["trials"]
            assert {t["run_id"] for t in trials} == ResultStore(runs / "tune-t-trials").completed_ids()


# -- read-only folders and a full disk on real filesystems ----------------------------------------

def _mount(*args) -> bool:
    if sys.platform != "linux" or os.geteuid() != 0:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def mounted(*args, target: Path):
    target.mkdir(parents=True, exist_ok=True)
    if not _mount(*args, str(target)):
        pytest.skip("cannot mount a test filesystem here (needs root on Linux)")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


@contextlib.contextmanager
def read_only_folder(base: Path):
    folder = base / "ro"
    folder.mkdir(parents=True)
    (folder / "runs").mkdir()
    with mounted("--bind", str(folder), target=folder):
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True).returncode:
            pytest.skip("cannot remount read-only here")
        yield folder


def test_read_only_folders_are_refused_before_any_work(tmp_path, monkeypatch):
    from gnnprivacy.records.record import RunRecord

    monkeypatch.chdir(tmp_path)
    RunRecord(run_id="r", method="gcn", dataset="csbm", config={}, seeds={"run": 0}, epsilon=float("inf"),
              delta=None, privacy={}, metrics={"test_accuracy": 0.5}, timings={}).save(tmp_path / "good")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"name": "s", "base": {"method": "gcn", "dataset": "csbm"},
                                                      "grid": {"lr": [0.1]}}))
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(TUNE))
    with read_only_folder(tmp_path) as ro:
        cases = {
            "train": (["train", "--dataset", "csbm", "-q", "--runs-dir", ro / "runs"], "runs_dir"),
            "sweep": (["sweep", "-c", tmp_path / "s.yaml", "--runs-dir", ro / "runs"], "runs_dir"),
            "tune": (["tune", "-c", tmp_path / "t.yaml", "--runs-dir", ro / "runs"], "runs_dir"),
            "demo": (["demo", "-q", "--runs-dir", tmp_path / "demo-runs", "-o", ro / "report"], "-o/--output"),
            "results -o": (["results", tmp_path / "good", "-o", ro / "x.csv", "--format", "csv"], "-o/--output"),
            "report -o": (["report", tmp_path / "good", "-o", ro / "report"], "output"),
        }
        for name, (args, parameter) in cases.items():
            t0 = time.perf_counter()
            code, text, _ = invoke(args)
            line = one_line_error(text)
            assert code != 0 and parameter in line and "Read-only file system" in line, (name, text)
            assert time.perf_counter() - t0 < 30, name  # refused at once: no training first
        assert not (tmp_path / "demo-runs").exists()  # checked, not created, before the report folder


def test_train_on_a_full_tmpfs(tmp_path):
    """A real full disk: a 64 KiB tmpfs filled to leave every 4 KiB step of room free."""
    with mounted("-t", "tmpfs", "-o", "size=64k", "tmpfs", target=tmp_path / "small") as small:
        outcomes = set()
        for free_kib in range(0, 64, 8):
            for entry in small.iterdir():
                subprocess.run(["rm", "-rf", str(entry)])
            filler = small / "filler"
            try:
                filler.write_bytes(b"\0" * ((64 - free_kib) * 1024))
            except OSError:
                pass  # the filler itself filled the disk
            code, text, stdout = invoke(_train_args(small / "runs"))
            if code == 0:
                outcomes.add("published")
            else:
                assert "No space left on device" in one_line_error(text), text
                outcomes.add("refused")
            assert_nothing_half_written(small / "runs")
        assert outcomes == {"published", "refused"}  # the range crossed from full to enough room


def _cora_root() -> Path:
    root = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS",
                               Path(__file__).resolve().parents[3] / "shared" / "datasets"))
    if not (root / "Cora" / "raw").is_dir():
        pytest.skip("needs the shared datasets (Cora)")
    return root


def test_dataset_cache_on_a_full_disk(tmp_path, monkeypatch):
    """torch's zip writer reports a full disk as a RuntimeError; the cache build then probes
    the cache folder, and names it and ENOSPC instead of blaming the (intact) raw files."""
    import tempfile

    import torch

    import gnnprivacy.datasets.pyg_cache as pyg_cache
    from gnnprivacy.datasets import load_dataset

    root = _cora_root()
    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path / "cache"))

    def full_disk_save(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 28416 vs 28304")

    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, prefix=None, **kwargs):
        if prefix == ".space-probe.":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_mkstemp(*args, prefix=prefix, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk_save)
    monkeypatch.setattr(pyg_cache.tempfile, "mkstemp", mkstemp)
    with pytest.raises(WriteFailedError, match="processed cache of dataset 'cora'.*No space left on device"):
        load_dataset("cora", root=root)
    monkeypatch.setattr(pyg_cache.tempfile, "mkstemp", real_mkstemp)  # control: room on the disk
    with pytest.raises(Exception, match="could not parse") as caught:
        load_dataset("cora", root=root)
    assert not isinstance(caught.value, WriteFailedError)


def test_dataset_cache_on_a_full_tmpfs(tmp_path, monkeypatch):
    from gnnprivacy.datasets import load_dataset

    root = _cora_root()
    with mounted("-t", "tmpfs", "-o", "size=2m", "tmpfs", target=tmp_path / "small") as small:
        monkeypatch.setenv("GNNPRIVACY_CACHE", str(small))
        with pytest.raises(WriteFailedError, match="No space left on device"):
            load_dataset("cora", root=root)


# -- signals -------------------------------------------------------------------------------------

@contextlib.contextmanager
def signal_when(condition, sig, *, timeout=120.0):
    """Send ``sig`` to this process once ``condition()`` holds (from a thread); a signal that
    arrives after the command returned is recorded instead of killing the test process."""
    late = []
    state = {"running": True, "sent": False}

    def on_signal(signum, frame):
        if state["running"] and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if state["running"]:
            raise Terminated()
        late.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and state["running"]:
            if condition():
                state["sent"] = True
                os.kill(os.getpid(), sig)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state["running"] = False
        thread.join(5)
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert not late, "the signal arrived after the command had finished"


def checkpoint_times(folder: Path) -> dict[str, int]:
    """Each checkpoint in ``folder`` and its modification time (ns)."""
    out = {}
    for path in folder.glob("*.pt") if folder.is_dir() else ():
        try:
            out[path.name] = path.stat().st_mtime_ns
        except FileNotFoundError:
            continue
    return out


def new_checkpoint(folder: Path, before: dict[str, int]) -> bool:
    """Whether ``folder`` holds a checkpoint written since ``before`` (`checkpoint_times`): a new
    file or a rewritten one. Comparing against a snapshot, not a clock, keeps the previous
    command's last checkpoint from counting (it may carry a timestamp just past any clock
    reading taken after it, within the file system's resolution)."""
    return any(before.get(name) != mtime for name, mtime in checkpoint_times(folder).items())


def test_signals_to_train_then_resume(tmp_path):
    runs = tmp_path / "runs"
    args = ["train", "--method", "heterpoisson", "--dataset", "csbm",
            "--dataset-args", "num_nodes=300,num_features=8,num_classes=3,avg_degree=4",
            "--epochs", "400", "-q", "--runs-dir", runs]
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        before = checkpoint_times(runs / "checkpoints")
        with signal_when(lambda: new_checkpoint(runs / "checkpoints", before), sig) as state:
            exit_code, text, _ = invoke(args + ["--resume"])
        assert state["sent"] and exit_code == code, text
        assert "Traceback" not in text and "nothing unfinished was published" in text
        assert not ResultStore(runs).completed_ids()
        assert_nothing_half_written(runs)
    exit_code, text, _ = invoke(args + ["--resume"])
    assert exit_code == 0, text
    (record,) = ResultStore(runs).records()
    assert record.info["resumed_from_step"] >= 100  # continued from the checkpoint


def test_signals_to_tune_then_rerun(tmp_path):
    config = tmp_path / "t.yaml"
    config.write_text(yaml.safe_dump({**TUNE, "base": {**TUNE["base"], "epochs": 400}}))
    runs = tmp_path / "runs"
    checkpoints = runs / "tune-t-trials" / "checkpoints"
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        # a trial's first checkpoint (step 100 of 400): the signal lands in the middle of a trial
        before = checkpoint_times(checkpoints)
        with signal_when(lambda: new_checkpoint(checkpoints, before), sig) as state:
            exit_code, text, _ = invoke(["tune", "-c", config, "--runs-dir", runs, "-q"])
        assert state["sent"] and exit_code == code, text
        assert "Traceback" not in text
        assert not (runs / "tune-t.json").exists() and not list((runs / ".claims").glob("*"))
    exit_code, text, _ = invoke(["tune", "-c", config, "--runs-dir", runs])
    assert exit_code == 0, text
    assert "unfinished earlier tune" in text and (runs / "tune-t.json").exists()


SWEEP_CLI = "from gnnprivacy.cli import main; main()"


def run_serially(spec, runs):
    """The rerun, in this process (the workers' code without a pool's start-up)."""
    from unittest import mock

    from gnnprivacy.experiments import executors
    from gnnprivacy.experiments.sweep import run_sweep

    with mock.patch.object(executors, "make_executor", lambda *a, **kw: SerialExecutor()):
        return run_sweep(spec, runs_dir=runs)


def _sweep_process(config, runs, *extra):
    return subprocess.Popen([sys.executable, "-c", SWEEP_CLI, "sweep", "-c", str(config), "--runs-dir", str(runs),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=_interruptible)


def _interruptible():
    """Ctrl-C's default disposition in the sweep process, as in a terminal: a test suite started
    in the background by a non-interactive shell (`nohup make test &`) passes SIGINT down ignored,
    and Python then installs no KeyboardInterrupt handler, so the SIGINT tests would see nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _live_group(pgid: int) -> list[str]:
    """Processes of the group that are alive (zombies, which no init reaps in some containers,
    are dead)."""
    out = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split()[1:2] and not line.split()[1].startswith("Z")]


def _wait_for(condition, proc, timeout=240.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _claims(runs):
    return list((runs / ".claims").glob("*.claim")) if (runs / ".claims").is_dir() else []


def test_sigint_to_a_sweep_starts_no_new_run(probe_base, probe_module, tmp_path):
    from gnnprivacy.experiments.sweep import SweepSpec, expand_sweep

    sweep = {"name": "int", "imports": [probe_module], "base": {**probe_base, "sleep": 2.0},
             "grid": {"lr": [0.1, 0.2, 0.3, 0.4]}}
    config = tmp_path / "s.yaml"
    config.write_text(yaml.safe_dump(sweep))
    runs = tmp_path / "runs"
    proc = _sweep_process(config, runs, "--workers", "2")
    _wait_for(lambda: len(_claims(runs)) == 2, proc)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the whole foreground group
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130 and "starting no new run" in out and "Traceback" not in out, out
    assert len(ResultStore(runs).completed_ids()) == 2  # the two running runs finished; none started
    deadline = time.monotonic() + 10
    while _live_group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _live_group(proc.pid)
    again = run_serially(SweepSpec.from_dict(sweep), runs)
    assert again.ok and again.skipped == 2 and len(again.succeeded) == 2
    assert ResultStore(runs).completed_ids() == {t.run_id for t in expand_sweep(SweepSpec.from_dict(sweep),
                                                                               runs_dir=runs)}


def test_sigterm_to_a_sweep_orphans_nothing(probe_base, probe_module, tmp_path):
    from gnnprivacy.experiments.sweep import SweepSpec

    sweep = {"name": "term", "imports": [probe_module], "base": {**probe_base, "sleep": 4.0},
             "grid": {"lr": [0.1, 0.2]}}
    config = tmp_path / "s.yaml"
    config.write_text(yaml.safe_dump(sweep))
    runs = tmp_path / "runs"
    proc = _sweep_process(config, runs, "--workers", "2")
    _wait_for(lambda: len(_claims(runs)) == 2, proc)
    os.kill(proc.pid, signal.SIGTERM)  # to the sweep only, as a scheduler stops a job's main process
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 143 and "SIGTERM" in out and "Traceback" not in out, out
    deadline = time.monotonic() + 10
    while _live_group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _live_group(proc.pid), _live_group(proc.pid)  # no worker left running
    assert not ResultStore(runs).completed_ids()
    again = run_serially(SweepSpec.from_dict(sweep), runs)
    assert again.ok and not again.elsewhere and len(again.succeeded) == 2  # the dead claims were retaken
    assert not _claims(runs)


def test_killed_resumable_sweep_continues_from_its_checkpoint(tmp_path):
    from gnnprivacy.experiments.sweep import SweepSpec

    sweep = {"name": "resumable", "base": {"method": "heterpoisson", "dataset": "csbm", "resume": True,
                                           "dataset_args": "num_nodes=300,num_features=8,num_classes=3,avg_degree=4",
                                           "epochs": 300},
             "grid": {"lr": [0.1]}}
    config = tmp_path / "s.yaml"
    config.write_text(yaml.safe_dump(sweep))
    runs = tmp_path / "runs"
    proc = _sweep_process(config, runs, "--workers", "1", "-q")
    _wait_for(lambda: bool(list((runs / "checkpoints").glob("*.pt"))) if (runs / "checkpoints").is_dir()
              else False, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not ResultStore(runs).completed_ids()
    result = run_serially(SweepSpec.from_dict(sweep), runs)
    assert result.ok and len(result.succeeded) == 1
    (record,) = ResultStore(runs).records()
    assert record.info["resumed_from_step"] >= 100 and record.info["steps"] == 300


def _thread_settings(_):
    import torch

    return os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads()


def test_workers_keep_the_parents_omp_num_threads(monkeypatch):
    from gnnprivacy.experiments.executors import LocalExecutor, default_threads

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert default_threads(1) == 1
    with LocalExecutor(workers=1) as ex:
        ((_, (env, threads)),) = list(ex.imap_unordered(_thread_settings, [0]))
    assert (env, threads) == ("1", 1)
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert default_threads(1) == max(1, os.cpu_count() or 1)  # control: without it, the CPU count


def test_local_executor_hands_the_pool_only_running_items(monkeypatch):
    from gnnprivacy.experiments.executors import LocalExecutor

    ex = LocalExecutor(workers=2)
    most = []

    class Pool:  # records how many items the pool holds when it is handed one more
        def submit(self, fn, item):
            from concurrent.futures import Future

            most.append(len(ex._in_flight) + 1)
            future = Future()
            future.set_result(fn(item))
            return future

    ex._pool = Pool()
    seen = [result for _, result in ex.imap_unordered(abs, [-1, -2, -3, -4, -5])]
    assert sorted(seen) == [1, 2, 3, 4, 5] and len(most) == 5
    assert max(most) == 2  # never more than `workers`: a queued run would start after Ctrl-C
