"""``-q`` drops progress and chatter, not the warnings about the result (issue 38 item 6:
the default Cora heterpoisson run reported 0.505 under -q with no hint why)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gnnprivacy.cli import main

SMALL = ["--dataset", "csbm", "--dataset-args", "num_nodes=200,num_features=8", "--steps", "2"]


def _train(tmp_path, *extra):
    return CliRunner().invoke(main, ["train", "--method", "dpmlp", *SMALL, "--runs-dir",
                                     str(tmp_path), *extra], catch_exceptions=False)


def test_quiet_still_prints_the_small_split_warning(tmp_path):
    quiet = _train(tmp_path, "-q")
    assert quiet.exit_code == 0, quiet.output
    assert "warning: the split leaves 100 training nodes (fewer than 500" in quiet.stderr
    assert "--train-frac 0.8" in quiet.stderr                       # what to do about it
    assert "[progress]" not in quiet.output and "test accuracy" in quiet.stdout
    as_json = _train(tmp_path, "-q", "--json")
    assert json.loads(as_json.stdout)["method"] == "dpmlp"           # stdout stays JSON
    assert as_json.stderr.count("warning: the split leaves") == 1
    loud = _train(tmp_path)                                          # said once without -q too
    assert loud.stderr.count("warning: the split leaves") == 1


def test_a_large_split_gives_no_warning_under_quiet(tmp_path):
    out = _train(tmp_path, "-q", "--split", "random", "--train-frac", "0.8", "--val-frac", "0",
                 "--test-frac", "0.2", "--dataset-args", "num_nodes=800,num_features=8")
    assert out.exit_code == 0, out.output
    assert "warning" not in out.stderr, out.stderr
