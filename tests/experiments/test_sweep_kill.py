"""Kill-and-resume: a sweep SIGKILLed mid-run and started again completes with each run exactly once."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import yaml

from gnnprivacy.records.store import ResultStore
from gnnprivacy.experiments.sweep import SweepSpec, expand_sweep, load_sweep, run_sweep

SWEEP_CLI = "from gnnprivacy.cli.sweep_cmd import sweep_command; sweep_command()"


def _sweep_process(config, runs):  # `gnnprivacy sweep` in its own process group
    return subprocess.Popen([sys.executable, "-c", SWEEP_CLI, "-c", str(config), "--runs-dir", str(runs),
                             "--workers", "1", "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _wait_until_dead(runs, timeout=60.0):
    """SIGKILL is asynchronous for the grandchildren (fork server, workers): wait until their
    claim locks are free, i.e. until they have exited."""
    deadline = time.monotonic() + timeout
    for claim in (runs / ".claims").glob("*.claim"):
        while claim.exists():
            try:
                fd = os.open(claim, os.O_RDWR)
            except FileNotFoundError:
                break
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{claim} is still locked"
                time.sleep(0.05)
            finally:
                os.close(fd)


def _snapshot(runs):
    return {p.name: p.read_bytes() for p in ResultStore(runs).record_paths()}


def test_sigkilled_sweep_resumes_without_loss_or_duplication(probe_base, probe_module, tmp_path):
    sweep = {"name": "killme", "imports": [probe_module], "base": {**probe_base, "sleep": 0.5},
             "grid": {"lr": [0.1, 0.2, 0.3, 0.4]}, "seeds": 2}
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep))
    runs = tmp_path / "runs"
    expected = {t.run_id for t in expand_sweep(SweepSpec.from_dict(sweep), runs_dir=runs)}
    assert len(expected) == 8

    proc = _sweep_process(config, runs)
    deadline = time.monotonic() + 240
    while len(ResultStore(runs).completed_ids()) < 2:
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep, its fork server and its workers
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    _wait_until_dead(runs)
    before = _snapshot(runs)
    assert 2 <= len(before) < 8, "killed too late to test resuming"
    for content in before.values():
        json.loads(content)  # every listed record is complete

    result = run_sweep(load_sweep(config), runs_dir=runs, workers=1)  # the restart
    assert result.ok and result.skipped == len(before) and len(result.succeeded) == 8 - len(before)

    store = ResultStore(runs)
    names = [p.name for p in store.record_paths()]
    assert len(names) == len(set(names)) == 8 and store.completed_ids() == expected
    assert {r["run_id"] for r in store.rows()} == expected and store.failures() == []
    assert all(before[name] == content for name, content in _snapshot(runs).items() if name in before)
    assert not list((runs / ".claims").glob("*.claim"))  # the killed attempt's claims were retaken and released
