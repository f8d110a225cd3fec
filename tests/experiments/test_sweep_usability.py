"""Issue 11 §4-§6 for sweeps: one option name per concept, a runnable template, bundled configs,
per-method grids, progress lines when nobody watches a terminal, ``-q`` silences everything."""

import io
import os
import re
import time

import pytest
import yaml
from click.testing import CliRunner

from gnnprivacy.experiments.progress import PlainTask, plain_progress, progress_factory, quiet_mode
from gnnprivacy.cli.sweep_cmd import sweep_command
from gnnprivacy.errors import UnknownNameError
from gnnprivacy.experiments.reproduce import config_dir
from gnnprivacy.experiments.sweep import SWEEP_TEMPLATE, SweepSpec, expand_sweep, load_sweep


def test_template_is_commented_and_runnable(tmp_path):
    """Every run of the template trains (in-process, through the sweep's worker body)."""
    from gnnprivacy.experiments.sweep import execute_task

    out = CliRunner().invoke(sweep_command, ["--template"])
    assert out.exit_code == 0 and out.output == SWEEP_TEMPLATE
    assert sum(line.lstrip().startswith("#") for line in out.output.splitlines()) >= 4
    config = tmp_path / "s.yaml"
    config.write_text(out.output)
    tasks = expand_sweep(load_sweep(config), runs_dir=tmp_path / "runs")
    outcomes = [execute_task(t) for t in tasks]
    assert [o.status for o in outcomes] == ["ok"] * 6, [o.error for o in outcomes]


@pytest.mark.slow
def test_template_runs_with_the_cli(tmp_path):
    """The acceptance command: gnnprivacy sweep --template > s.yaml && gnnprivacy sweep -c s.yaml --runs-dir DIR."""
    config = tmp_path / "s.yaml"
    config.write_text(CliRunner().invoke(sweep_command, ["--template"]).output)
    out = CliRunner().invoke(sweep_command, ["-c", str(config), "--runs-dir", str(tmp_path / "runs"), "--workers", "1"])
    assert out.exit_code == 0, out.output
    assert "6 runs; 0 already finished, 6 ran, 0 failed" in out.output


def test_per_method_grid_skips_parameters_a_method_does_not_take(tmp_path):
    spec = SweepSpec.from_dict(yaml.safe_load(SWEEP_TEMPLATE))
    tasks = expand_sweep(spec, runs_dir=tmp_path)
    by_method = {}
    for t in tasks:
        by_method.setdefault(t.values["method"], []).append(t.values.get("epsilon"))
    assert by_method["gcn"] == [None, None]  # once per seed, without epsilon
    assert sorted(by_method["dpmlp"]) == [4, 4, 8, 8]


def test_a_key_no_method_of_the_sweep_takes_is_an_error_naming_it(tmp_path):
    spec = SweepSpec.from_dict({"name": "x", "base": {"dataset": "csbm"},
                                "grid": {"method": ["gcn", "mlp"], "epsilon": [1, 2]}})
    with pytest.raises(UnknownNameError, match=r"none of the sweep's methods \['gcn', 'mlp'\].*received 'epsilon'"):
        expand_sweep(spec, runs_dir=tmp_path)
    spec = SweepSpec.from_dict({"name": "x", "grid": {"method": ["gcn", "dpmlp"], "epsilonn": [1]}})
    with pytest.raises(UnknownNameError, match="epsilonn"):
        expand_sweep(spec, runs_dir=tmp_path)


@pytest.mark.parametrize("path", sorted(config_dir().glob("*.yaml")), ids=lambda p: p.name)
def test_bundled_reproduction_configs_are_valid_sweep_files(path, tmp_path):
    spec = load_sweep(path)  # `notes`, `references`, `quick` are accepted
    assert expand_sweep(spec, runs_dir=tmp_path)


def test_one_option_name_per_concept_with_hidden_aliases():
    from gnnprivacy.cli.reproduce_cmd import reproduce_command

    for command in (sweep_command, reproduce_command):
        text = CliRunner().invoke(command, ["--help"]).output
        assert "--runs-dir" in text and "--runs " not in text and "--data-root DIRECTORY" in text
    text = CliRunner().invoke(reproduce_command, ["--help"]).output
    assert "-o, --output" in text and not re.search(r"--report(?![-\w])", text)  # --report-only is another option
    names = {o.name: o for o in reproduce_command.params}
    assert names["runs_alias"].opts == ["--runs"] and names["runs_alias"].hidden
    assert names["report_alias"].opts == ["--report"] and names["report_alias"].hidden


def test_plain_progress_lines_have_count_elapsed_and_eta():
    now = [0.0]
    stream = io.StringIO()
    task = PlainTask("sweep demo", 4, stream=stream, interval=10, unit="run", clock=lambda: now[0])
    now[0] = 5.0
    task.update()  # within the interval: no line
    now[0] = 12.0
    task.update()
    now[0] = 30.0
    task.heartbeat()  # nothing advanced for 10 s: a heartbeat line
    now[0] = 40.0
    task.update(2)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[progress] sweep demo: run 0/4 (0%), elapsed 0:00:00"
    assert lines[1] == "[progress] sweep demo: run 2/4 (50%), elapsed 0:00:12, ETA 0:00:12"
    assert lines[2].startswith("[progress] sweep demo: run 2/4 (50%), elapsed 0:00:30, ETA")
    assert lines[3] == "[progress] sweep demo: run 4/4 (100%), elapsed 0:00:40"


def test_progress_is_plain_when_not_a_tty_and_heartbeats():
    stream = io.StringIO()
    with plain_progress(stream, interval=0.05) as make:
        make("train dpmlp", 100)
        time.sleep(0.4)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 2 and all(line.startswith("[progress] train dpmlp: step 0/100") for line in lines)
    with progress_factory(True, stream=io.StringIO()) as make:  # StringIO is not a TTY
        assert isinstance(make("x", 3), PlainTask)
    with progress_factory(False) as make:
        assert make is None


def test_quiet_silences_pyg_and_warnings(capfd):
    import warnings

    from gnnprivacy.datasets.pyg_cache import _quiet

    with quiet_mode(True):
        assert os.environ["GNNPRIVACY_QUIET"] == "1"
        with _quiet():
            import sys

            print("Processing...", file=sys.stderr)
            print("Done!")
        warnings.warn("should not show")
    assert "GNNPRIVACY_QUIET" not in os.environ
    out, err = capfd.readouterr()
    assert "Processing" not in err and "Done" not in out and "should not show" not in err


def test_sweep_without_tty_logs_progress_lines_and_quiet_is_silent(probe_base, probe_module, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setenv("GNNPRIVACY_PROGRESS_INTERVAL", "0")
    config = tmp_path / "s.yaml"
    config.write_text(yaml.safe_dump({"name": "plain", "imports": [probe_module], "base": probe_base,
                                      "grid": {"lr": [0.1, 0.2]}}))
    out = CliRunner().invoke(sweep_command, ["-c", str(config), "--runs-dir", str(tmp_path / "r"), "--workers", "1"])
    assert out.exit_code == 0, out.output
    assert "[progress] sweep plain: run 2/2 (100%)" in out.stderr
    # the old spelling --runs still works (hidden alias); -q prints only the summary line
    quiet = CliRunner().invoke(sweep_command, ["-c", str(config), "--runs", str(tmp_path / "r"), "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert quiet.stdout.startswith("sweep plain: 2 runs; 2 already finished, 0 ran")


def test_workers_log_step_progress_when_not_on_a_tty(tmp_path, monkeypatch, capfd):
    from gnnprivacy.experiments.sweep import STEP_PROGRESS_ENV, execute_task

    monkeypatch.setenv(STEP_PROGRESS_ENV, "1")
    monkeypatch.setenv("GNNPRIVACY_PROGRESS_INTERVAL", "0")
    spec = SweepSpec.from_dict({"name": "steps", "base": {"method": "gcn", "dataset": "csbm", "epochs": 3,
                                                          "dataset_args": "num_nodes=100,num_features=8"},
                                "grid": {"lr": [0.01]}})
    (task,) = expand_sweep(spec, runs_dir=tmp_path)
    assert execute_task(task).status == "ok"
    err = capfd.readouterr().err
    assert re.search(rf"\[progress\] {task.run_id} \(.*\): step 3/3 \(100%\), elapsed", err), err
    monkeypatch.delenv(STEP_PROGRESS_ENV)
    (task2,) = expand_sweep(spec, runs_dir=tmp_path / "b")
    execute_task(task2)
    assert "[progress]" not in capfd.readouterr().err


def test_a_task_closed_early_says_so_and_stops_heartbeating():
    now = [0.0]
    stream = io.StringIO()
    task = PlainTask("full-batch gcn", 300, stream=stream, interval=10, clock=lambda: now[0])
    now[0] = 3.0
    task.update(61)
    task.close()
    now[0] = 60.0
    task.heartbeat()                 # without close(): "step 61/300 ... ETA" every interval
    lines = stream.getvalue().splitlines()
    assert lines[-1] == "[progress] full-batch gcn: stopped at step 61/300, elapsed 0:00:03"
    assert len(lines) == 2


def test_early_stopping_closes_the_trainers_bar():
    import torch
    from torch_geometric.data import Data

    from gnnprivacy.training.nonprivate import FullBatchTrainer

    made = []

    class Task:
        def __init__(self):
            self.done, self.closed = 0, False

        def update(self, n=1):
            self.done += n

        def close(self):
            self.closed = True

    def progress(description, total):
        made.append(Task())
        return made[-1]

    g = torch.Generator().manual_seed(0)
    n = 60
    data = Data(x=torch.randn(n, 4, generator=g), y=torch.randint(0, 2, (n,), generator=g),
                edge_index=torch.randint(0, n, (2, 200), generator=g))
    idx = torch.arange(n)
    data.train_mask, data.val_mask, data.test_mask = idx < 30, (idx >= 30) & (idx < 45), idx >= 45
    FullBatchTrainer("gcn", epochs=400, patience=5, generator=0, progress=progress).fit(data)
    assert made[0].closed and 0 < made[0].done < 400
    FullBatchTrainer("gcn", epochs=3, patience=50, generator=0, progress=progress).fit(data)
    assert not made[1].closed and made[1].done == 3
