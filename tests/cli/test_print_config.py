"""``train --print-config`` prints every default resolved for the data (issue 11 §4)."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from gnnprivacy.cli import main
from gnnprivacy.method.config import resolve_config
from gnnprivacy.method.resolve import resolved_values
from gnnprivacy.method.runner import load_run_data, run

GRAPH = "num_nodes=400"


@pytest.mark.parametrize("method", ["heterpoisson", "dpgnn", "dpmlp"])
@pytest.mark.parametrize("preset", ["paper", "auto"])
def test_print_config_has_no_unresolved_training_values(method, preset):
    r = CliRunner().invoke(main, ["train", "--method", method, "--preset", preset,
                                  "--dataset-args", GRAPH, "--print-config"])
    assert r.exit_code == 0, r.output
    values = yaml.safe_load(r.output)
    for key in ("lr", "delta", "steps", "split", "train_frac", "test_frac"):
        assert values[key] is not None, (key, values)
    assert 0 < values["delta"] < 1.0 / 200  # below 1/n of the privacy units


@pytest.mark.parametrize("method, preset", [("heterpoisson", "paper"), ("dpgnn", "paper"),
                                            ("dpmlp", "paper"), ("dpmlp", "auto")])
def test_resolved_values_are_what_a_run_executes(method, preset, tmp_path):
    """Positive control against drift: the printed steps/delta are the run's own."""
    values = {"method": method, "preset": preset, "dataset_args": GRAPH, "epochs": 2,
              "runs_dir": str(tmp_path)}
    config, params = resolve_config(values)
    resolved = resolved_values(config, params, load_run_data(config))
    record = run(values, save=False)
    assert record.info["steps"] == resolved["steps"]
    assert record.delta == pytest.approx(resolved["delta"], rel=1e-12)
