"""Concurrency and interruption of sweeps, with real processes (issue 10).

- Two sweeps started on one runs directory share the work (each run executed once in total).
- Ctrl-C twice (SIGINT to the process group, as a terminal sends it) leaves no worker running.
- A stale claim (dead pid) is retaken; a live one is respected.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from gnnprivacy.records.store import ResultStore
from gnnprivacy.experiments.sweep import SweepSpec, expand_sweep

SWEEP_CLI = "from gnnprivacy.cli.sweep_cmd import sweep_command; sweep_command()"


def _sweep(config, runs, *extra):
    return subprocess.Popen([sys.executable, "-c", SWEEP_CLI, "-c", str(config), "--runs-dir", str(runs),
                             "--workers", "1", *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            # a shell's background job inherits SIGINT ignored: restore the default
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow  # two sweeps, each starting a worker pool: about a minute on 2 cores
def test_two_sweeps_on_one_runs_dir_share_the_work(probe_base, probe_module, tmp_path):
    sweep = {"name": "shared", "imports": [probe_module], "base": {**probe_base, "sleep": 0.6},
             "grid": {"lr": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}}
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep))
    runs = tmp_path / "runs"
    expected = {t.run_id for t in expand_sweep(SweepSpec.from_dict(sweep), runs_dir=runs)}
    procs = [_sweep(config, runs), _sweep(config, runs)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    ran = [int(re.search(r"(\d+) ran", o).group(1)) for o in outs]
    assert sum(ran) == len(expected), (ran, outs)  # each run executed exactly once in total
    assert ResultStore(runs).completed_ids() == expected
    assert not list((runs / ".claims").glob("*.claim"))  # every claim released


HOLD_CLAIM = ("import fcntl, json, os, sys, time; fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR); "
              "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, json.dumps({'pid': os.getpid(), 'host': 'h'}).encode()); "
              "print('held', flush=True); time.sleep(60)")


def test_claims_stale_and_live(tmp_path):
    store = ResultStore(tmp_path)
    assert store.claim("r1")
    assert ResultStore(tmp_path)._stale_claim_inode(tmp_path / ".claims" / "r1.claim", 60) is None  # held
    # a claim left by a process that died (even one left a zombie: its lock is gone) is retaken
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / ".claims" / "r2.claim").write_text(json.dumps({"pid": int(dead), "host": os.uname().nodename}))
    assert store.claim("r2")
    # a live process holding the lock keeps its claim
    holder = subprocess.Popen([sys.executable, "-c", HOLD_CLAIM, str(tmp_path / ".claims" / "r3.claim")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not store.claim("r3")
    finally:
        holder.kill()
        holder.wait()
    assert store.claim("r3")  # its owner is gone now
    # an empty, unlocked, fresh file is a claim being created: respected
    (tmp_path / ".claims" / "r4.claim").write_text("")
    assert not store.claim("r4")
    for run_id in ("r1", "r2", "r3"):
        store.release(run_id)
        assert not (tmp_path / ".claims" / f"{run_id}.claim").exists()


@pytest.mark.slow  # a sweep with a 2-worker pool, interrupted: about a minute on 2 cores
def test_ctrl_c_twice_stops_every_worker_promptly(probe_base, probe_module, tmp_path):
    sweep = {"name": "interrupt", "imports": [probe_module], "base": {**probe_base, "sleep": 120},
             "grid": {"lr": [0.1, 0.2, 0.3]}}
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep))
    runs = tmp_path / "runs"
    proc = _sweep(config, runs, "--workers", "2")
    deadline = time.monotonic() + 120
    while not (runs / ".claims").is_dir() or len(list((runs / ".claims").glob("*.claim"))) < 2:
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "the runs never started"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the whole foreground group
    time.sleep(1.0)
    assert proc.poll() is None  # first Ctrl-C: waits for the running runs
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    out = proc.communicate(timeout=30)[0]
    while _group_alive(proc.pid) and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    alive = _group_alive(proc.pid)
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not alive, f"workers still running {time.monotonic() - t0:.1f} s after the second Ctrl-C"
    assert proc.returncode != 0 and "Ctrl-C again" in out, out
