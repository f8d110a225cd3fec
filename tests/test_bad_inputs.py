"""The bad-input table (issue 10): every bad input we tried, with its outcome, as one test each.

:data:`CASES` is the single source: each case is one test (``test_bad_input``) and one row of
``docs/bad-inputs.md``, which is generated from it (``python tests/test_bad_inputs.py --write``)
and checked to be up to date by ``test_table_is_up_to_date``, so table and tests cannot drift.

Outcomes:

- ``error``: the command exits non-zero (the API call raises a ``ValueError`` subclass) with a
  message containing every ``expect`` fragment and no traceback;
- ``warning``: the command succeeds with the valid part of the input, and says on stderr
  which part it skipped (the fragments).

Goal: 100 % clear errors, 0 silent wrong results (no case may pass with exit code 0 unless its
outcome is ``warning``).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "bad-inputs.md"
SMALL = "num_nodes=120,num_features=8,num_classes=3,avg_degree=4"
T = ["train", "--dataset", "csbm", "--dataset-args", SMALL, "--epochs", "2", "-q"]
A = ["account", "--mechanism"]


@dataclass(frozen=True)
class Case:
    """One bad input: where it enters, what it is, how it is run, and the expected outcome."""

    area: str
    text: str  #: the input, as a user would write it
    kind: str  #: cli | data | api
    args: tuple = ()  #: cli: arguments of `gnnprivacy` ({tmp} = a scratch folder); data: mutation name
    expect: tuple[str, ...] = ()
    outcome: str = "error"
    files: dict = field(default_factory=dict)  #: name -> text written under {tmp} first
    setup: str | None = None  #: name of a setup function below (records ...)

    @property
    def id(self) -> str:
        return f"{self.area}: {self.text}"


def cli(area, text, args, *expect, files=None, setup=None, outcome="error"):
    return Case(area, text, "cli", tuple(args), tuple(expect), outcome, files or {}, setup)


def data(text, mutation, *expect):
    return Case("data (validate_data / gp.train)", text, "data", (mutation,), tuple(expect))


def sweep(text, body, *expect):
    return cli("sweep file", text, ["sweep", "-c", "{tmp}/s.yaml", "--runs-dir", "{tmp}/runs"], *expect,
               files={"s.yaml": body})


GOOD_SWEEP = "name: ok\nbase: {dataset: csbm, method: gcn}\ngrid: {lr: [0.1]}\n"

CASES: list[Case] = [
    # -- train: the split --------------------------------------------------------------------
    cli("train split", "--train-frac 0 (gcn)", T + ["--method", "gcn", "--train-frac", "0"],
        "train_mask", "non-empty training set", "--train-frac"),
    cli("train split", "--train-frac 0 (dpmlp)", T + ["--method", "dpmlp", "--train-frac", "0"],
        "train_mask", "non-empty training set"),
    cli("train split", "--train-frac 0 (heterpoisson)", T + ["--method", "heterpoisson", "--train-frac", "0"],
        "train_mask", "non-empty training set"),
    cli("train split", "--train-frac 1.0", T + ["--train-frac", "1.0"], "test_mask", "non-empty test set"),
    cli("train split", "--train-frac 0.9 --val-frac 0.1 (no test nodes)",
        T + ["--train-frac", "0.9", "--val-frac", "0.1"], "test_mask", "non-empty test set"),
    cli("train split", "--train-frac -0.1", T + ["--train-frac", "-0.1"], "train_frac", "[0, 1]"),
    cli("train split", "--train-frac 1.5", T + ["--train-frac", "1.5"], "train_frac", "[0, 1]"),
    cli("train split", "--train-frac nan", T + ["--train-frac", "nan"], "train_frac"),
    cli("train split", "fractions summing to 1.2", T + ["--train-frac", "0.6", "--val-frac", "0.3",
                                                      "--test-frac", "0.3"], "summing to <= 1"),
    cli("train split", "--split public on csbm (no public split)", T + ["--split", "public"], "split", "no public split"),
    cli("train split", "--split weird", T + ["--split", "weird"], "split", "random"),
    cli("train split", "--split-seed -1", T + ["--split-seed", "-1"], "split_seed"),
    # -- train: output and data locations ----------------------------------------------------
    cli("train output", "--runs-dir is a file", T + ["--runs-dir", "{tmp}/afile"], "runs", "afile",
        files={"afile": "x"}),
    cli("train output", "--runs-dir under a file (unwritable)", T + ["--runs-dir", "{tmp}/afile/sub"],
        "runs", "afile", files={"afile": "x"}),
    cli("train data", "--data-root does not exist", T + ["--data-root", "{tmp}/nowhere"], "data", "nowhere"),
    cli("train data", "--data-root is a file", T + ["--data-root", "{tmp}/afile"], "data", "afile",
        files={"afile": "x"}),
    cli("train data", "--dataset cora with an empty data root", ["train", "--dataset", "cora", "--data-root", "{tmp}/empty",
                                                                "-q"], "cora", "missing", setup="empty_dir"),
    # -- train: names and values -------------------------------------------------------------
    cli("train options", "--method nope", T + ["--method", "nope"], "method", "heterpoisson"),
    cli("train options", "--dataset nope", ["train", "--dataset", "nope", "-q"], "nope", "csbm"),
    cli("train options", "--seed -1", T + ["--seed", "-1"], "seed"),
    cli("train options", "--epsilon 0 (dpmlp)", T + ["--method", "dpmlp", "--epsilon", "0"], "epsilon"),
    cli("train options", "--epsilon -1 (heterpoisson)", T + ["--method", "heterpoisson", "--epsilon", "-1"], "epsilon"),
    cli("train options", "--epsilon inf (dpmlp)", T + ["--method", "dpmlp", "--epsilon", "inf"], "epsilon"),
    cli("train options", "--epsilon 8 for gcn (takes no epsilon)", T + ["--method", "gcn", "--epsilon", "8"],
        "epsilon", "gcn"),
    cli("train options", "--eps-e 1 for featurerr (edges are released clean)",
        T + ["--method", "featurerr", "--eps-e", "1"], "eps_e", "featurerr"),
    cli("train options", "--eps-f 1 for edge-rand (features are released clean)",
        T + ["--method", "edge-rand", "--eps-f", "1"], "eps_f", "edge-rand"),
    cli("train options", "--eps-f 1000 (featurerr; e^-eps underflows, the accountant would see no noise)",
        T + ["--method", "featurerr", "--eps-f", "1000"], "eps_f", "700"),
    cli("train options", "--epsilon abc", T + ["--epsilon", "abc"], "abc", "not a valid float"),
    cli("train options", "--epochs 0", T + ["--epochs", "0"], "epochs"),
    cli("train options", "--lr -1 (gcn)", T + ["--lr", "-1"], "lr"),
    cli("train options", "--dropout 1.5", T + ["--dropout", "1.5"], "dropout"),
    cli("train options", "--dataset-args garbage", T[:3] + ["--dataset-args", "garbage", "-q"], "dataset_args",
        "key=value"),
    cli("train options", "--dataset-args foo=1 (unknown csbm argument)", T[:3] + ["--dataset-args", "foo=1", "-q"],
        "foo"),
    cli("train options", "--dataset-args num_nodes=-5", T[:3] + ["--dataset-args", "num_nodes=-5", "-q"],
        "num_nodes"),
    cli("train options", "--dataset-args num_classes=1 (one class)", T[:3] + ["--dataset-args",
                                                                          "num_nodes=60,num_classes=1", "-q"],
        "homophily", "num_classes is 1"),
    cli("train options", "--dataset-args num_classes=1,homophily=1 (one class)",
        T[:3] + ["--dataset-args", "num_nodes=60,num_classes=1,homophily=1", "-q"], "y[train_mask]",
        "at least 2 classes"),
    cli("train privacy", "--delta 0.5 (heterpoisson)", T + ["--method", "heterpoisson", "--delta", "0.5"],
        "delta", "1/n", "--allow-large-delta"),
    cli("train privacy", "--delta 0.5 (dpmlp)", T + ["--method", "dpmlp", "--delta", "0.5"], "delta", "1/n"),
    cli("train privacy", "--delta 0 (dpmlp)", T + ["--method", "dpmlp", "--delta", "0"], "delta", "[1e-12, 1)"),
    # -- extreme budgets (issue 22 item 6) ---------------------------------------------------
    cli("train privacy", "--delta 1e-20 (heterpoisson: the PLD read it as epsilon infinity and "
        "over-noised or gave up)", T + ["--method", "heterpoisson", "--delta", "1e-20"], "delta",
        "[1e-12, 1)"),
    cli("train privacy", "--epsilon 1e6 (dpmlp: the PLD grid step overflowed, OverflowError)",
        T + ["--method", "dpmlp", "--epsilon", "1e6"], "epsilon", "[0.001, 100000]"),
    cli("train privacy", "--epsilon 1e-4 (heterpoisson: below the supported range)",
        T + ["--method", "heterpoisson", "--epsilon", "1e-4"], "epsilon", "[0.001, 100000]"),
    cli("train privacy", "--epsilon 1e5 --steps 1 (heterpoisson: the coarse calibration grid "
        "overflowed; now calibrated)", T + ["--method", "heterpoisson", "--epsilon", "1e5", "--steps", "1",
                                            "--runs-dir", "{tmp}/r"], "record:", outcome="ok"),
    cli("train privacy", "--epsilon 0.01 on a 5,000-node csbm (heterpoisson: RecursionError; now "
        "calibrated)", ["train", "--method", "heterpoisson", "--dataset", "csbm", "--dataset-args",
                        "num_nodes=5000", "--epsilon", "0.01", "-q", "--runs-dir", "{tmp}/r"],
        "epsilon 0.00999", outcome="ok"),
    # -- what was spent (issue 22 item 7) ---------------------------------------------------
    Case("train privacy", "a hand-edited accounting-cache entry (calibration noise 0.05: epsilon "
         "7,915 against a target of 8 with exit 0)", "api", ("edited_cache",),
         ("failed its checksum", "recomputing", "epsilon 7.99"), "warning"),
    Case("train privacy", "a forged accounting-cache entry with a valid checksum", "api",
         ("forged_cache",), ("spent epsilon", "above its target 8", "no finished record"), "error"),
    cli("train privacy", "--q-b 1e-6 (heterpoisson: under one central node per step)",
        T + ["--method", "heterpoisson", "--q-b", "1e-6"], "q_b", "expected", "nodes per step"),
    cli("train device", "--device banana", T + ["--device", "banana"], "device", "banana"),
    cli("train device", "--device cuda on CPU-only torch (gcn)", T + ["--device", "cuda"], "cuda",
        "is_available() is False"),
    cli("train device", "--device cuda on CPU-only torch (dpgnn)", T + ["--method", "dpgnn", "--device", "cuda"],
        "cuda", "is_available() is False"),
    cli("train privacy", "--secure-mode for gcn (not private)", T + ["--method", "gcn", "--secure-mode"],
        "secure_mode", "gcn"),
    # -- audit -----------------------------------------------------------------------------
    cli("audit", "--epsilon -1 (feat-duchi: the claim is named, not a per-coordinate share)",
        ["audit", "--method", "feat-duchi", "--dataset", "csbm", "--epsilon", "-1"],
        "epsilon", "received -1.0"),
    # -- train: config files -----------------------------------------------------------------
    cli("config file", "-c missing.yaml", T + ["-c", "{tmp}/missing.yaml"], "missing.yaml"),
    cli("config file", "-c with malformed YAML", T + ["-c", "{tmp}/c.yaml"], "valid YAML",
        files={"c.yaml": "method: [gcn\n"}),
    cli("config file", "-c holding a list", T + ["-c", "{tmp}/c.yaml"], "mapping", files={"c.yaml": "- a\n- b\n"}),
    cli("config file", "-c with an unknown key", T + ["-c", "{tmp}/c.yaml"], "bogus",
        files={"c.yaml": "bogus: 1\n"}),
    cli("config file", "-c with epsilon: eight", T + ["-c", "{tmp}/c.yaml"], "epsilon",
        files={"c.yaml": "method: dpmlp\nepsilon: eight\n"}),
    # -- data objects (the public API and every dataset the runner loads) --------------------
    data("NaN in x", "nan_x", "x", "NaN", "1 NaN"),
    data("inf in x", "inf_x", "x", "infinite"),
    data("x is 1-D", "x_1d", "x", "2-D"),
    data("x is an integer tensor", "x_int", "x", "floating-point"),
    data("x missing", "x_none", "x", "NoneType"),
    data("x with 0 features", "x_empty", "x", "at least one node"),
    data("y is float", "y_float", "y", "integer class labels"),
    data("y has the wrong length", "y_short", "y", "one label per node"),
    data("negative labels", "y_negative", "y", ">= 0"),
    data("edge_index of shape [3, E]", "ei_3", "edge_index", "[2, num_edges]"),
    data("edge_index is float", "ei_float", "edge_index", "integer"),
    data("edge_index id out of range", "ei_range", "edge_index", "[0, 6)"),
    data("edge_index negative id", "ei_negative", "edge_index", "[0, 6)"),
    data("train_mask is an int tensor", "mask_int", "train_mask", "torch.bool"),
    data("train_mask of the wrong length", "mask_short", "train_mask", "length"),
    data("train and test masks overlap", "mask_overlap", "train_mask and test_mask", "disjoint"),
    data("empty training set", "mask_train_empty", "train_mask", "non-empty training set"),
    data("empty test set", "mask_test_empty", "test_mask", "non-empty test set"),
    data("no train_mask attribute", "mask_missing", "train_mask"),
    data("one class among the training labels", "one_class", "at least 2 classes"),
    Case("data (validate_data / gp.train)", "task='regression'", "data", ("bad_task",), ("task", "node_classification")),
    # -- sweep files -------------------------------------------------------------------------
    sweep("unknown top-level key", "name: x\ngrid: {lr: [1]}\nbogus: 1\n", "bogus"),
    sweep("no name", "grid: {lr: [1]}\n", "name"),
    sweep("name with a space", "name: a b\ngrid: {lr: [1]}\n", "name"),
    sweep("no grid", "name: x\n", "grid"),
    sweep("empty grid", "name: x\ngrid: {}\n", "grid", "non-empty mapping"),
    sweep("grid value not a list", "name: x\ngrid: {lr: 0.1}\n", "grid.lr", "list"),
    sweep("grid value an empty list", "name: x\ngrid: {lr: []}\n", "grid.lr", "non-empty list"),
    sweep("seeds: 0", "name: x\ngrid: {lr: [1]}\nseeds: 0\n", "seeds"),
    sweep("seeds together with an explicit seed", "name: x\nbase: {seed: 1}\ngrid: {lr: [1]}\nseeds: 2\n", "seeds"),
    sweep("a key both in base and grid", "name: x\nbase: {lr: 1}\ngrid: {lr: [1]}\n", "grid", "'lr'"),
    sweep("runs_dir inside the sweep", "name: x\nbase: {runs_dir: r}\ngrid: {lr: [1]}\n", "runs_dir", "--runs-dir"),
    sweep("a key no method of the sweep takes", "name: x\ngrid: {method: [gcn, mlp], epsilon: [1]}\n",
          "none of the sweep's methods", "epsilon"),
    sweep("a misspelled key", "name: x\ngrid: {method: [gcn], lrr: [1]}\n", "lrr"),
    sweep("an unknown method", "name: x\ngrid: {method: [nope]}\n", "method", "nope"),
    sweep("imports a missing module", "name: x\nimports: [no_such_module]\ngrid: {lr: [1]}\n", "no_such_module"),
    sweep("malformed YAML", "name: x\ngrid: {lr: [1, 2}\n", "valid YAML"),
    sweep("a YAML list", "- a\n- b\n", "mapping"),
    sweep("a bad value (lr: -1)", "name: x\nbase: {method: gcn}\ngrid: {lr: [-1]}\n", "lr"),
    cli("sweep options", "-c missing.yaml", ["sweep", "-c", "{tmp}/missing.yaml"], "missing.yaml"),
    cli("sweep options", "--workers 0", ["sweep", "-c", "{tmp}/s.yaml", "--workers", "0"], "workers",
        files={"s.yaml": GOOD_SWEEP}),
    cli("sweep options", "--executor dask", ["sweep", "-c", "{tmp}/s.yaml", "--executor", "dask"], "dask",
        files={"s.yaml": GOOD_SWEEP}),
    cli("sweep options", "--address with the local executor", ["sweep", "-c", "{tmp}/s.yaml", "--address", "x:1",
                                                               "--runs-dir", "{tmp}/r"], "address",
        files={"s.yaml": GOOD_SWEEP}),
    cli("sweep options", "--runs-dir is a file", ["sweep", "-c", "{tmp}/s.yaml", "--runs-dir", "{tmp}/afile"],
        "afile", files={"s.yaml": GOOD_SWEEP, "afile": "x"}),
    cli("sweep options", "--runs-dir under a file", ["sweep", "-c", "{tmp}/s.yaml", "--runs-dir", "{tmp}/afile/r"],
        "runs_dir", "writable", files={"s.yaml": GOOD_SWEEP, "afile": "x"}),
    # -- run records, results, report -------------------------------------------------------
    cli("records", "a truncated record: results", ["results", "{tmp}/runs"], "skipping run record", "broken.json",
        "ok-run", setup="truncated_record", outcome="warning"),
    cli("records", "a truncated record: report", ["report", "{tmp}/runs", "-o", "{tmp}/out"],
        "skipped run record", "broken.json", setup="truncated_record", outcome="warning"),
    Case("records", "a truncated record: a sweep counts it as not finished (reruns it)", "api",
         ("truncated_not_finished",), ("broken",), "warning", {}, "truncated_record"),
    cli("records", "a record missing its metrics", ["results", "{tmp}/runs"], "missing key", "metrics",
        setup="keyless_record", outcome="warning"),
    cli("records", "a corrupt .failed.json", ["results", "{tmp}/runs"], "ok-run", setup="corrupt_failure",
        outcome="warning"),
    Case("records", "read_record on a truncated file", "api", ("read_truncated",), ("broken.json", "run record"),
         "error", {}, "truncated_record"),
    cli("report", "--metric test_acc (unknown)", ["report", "{tmp}/runs", "-o", "{tmp}/out", "--metric", "test_acc"],
        "test_acc", "test_accuracy", setup="good_record"),
    cli("report", "an empty runs directory", ["report", "{tmp}/empty", "-o", "{tmp}/out"], "at least one finished",
        setup="empty_dir"),
    cli("report", "-o is a file", ["report", "{tmp}/runs", "-o", "{tmp}/afile"], "afile",
        files={"afile": "x"}, setup="good_record"),
    cli("report", "runs directory does not exist", ["report", "{tmp}/nowhere", "-o", "{tmp}/out"], "nowhere",
        "does not exist"),
    cli("results", "runs directory does not exist", ["results", "{tmp}/nowhere"], "nowhere", "does not exist"),
    cli("results", "--filter without '='", ["results", "{tmp}/runs", "--filter", "method"], "KEY=VALUE",
        setup="good_record"),
    cli("results", "--filter on an unknown key", ["results", "{tmp}/runs", "--filter", "bogus=1"], "bogus",
        setup="good_record"),
    cli("results", "--format parquet without -o", ["results", "{tmp}/runs", "--format", "parquet"], "-o",
        setup="good_record"),
    cli("results", "--format xml", ["results", "{tmp}/runs", "--format", "xml"], "xml", setup="good_record"),
    cli("reproduce", "an unknown reproduction", ["reproduce", "nope"], "nope", "000-table2"),
    cli("reproduce", "no name", ["reproduce"], "NAME", "--list"),
    cli("reproduce", "--runs-dir and the old --runs disagree", ["reproduce", "000-table2", "--runs-dir", "{tmp}/a",
                                                               "--runs", "{tmp}/b"], "--runs-dir once"),
    cli("reproduce", "-o and the old --report disagree", ["reproduce", "000-table2", "-o", "{tmp}/a",
                                                         "--report", "{tmp}/b"], "-o/--output once"),
    cli("results", "RUNS_DIR and --runs-dir disagree", ["results", "{tmp}/runs", "--runs-dir", "{tmp}/empty"],
        "runs directory once", setup="good_and_empty"),
    cli("results", "no runs directory at all", ["results"], "RUNS_DIR"),
    cli("datasets", "--data-root is a file", ["datasets", "--data-root", "{tmp}/afile"], "afile",
        files={"afile": "x"}),
    # -- account (issue 24) -------------------------------------------------------------------
    cli("account", "--noise-multiplier and --target-epsilon together",
        A + ["dpsgd", "--sample-rate", "0.01", "--noise-multiplier", "1", "--target-epsilon", "1"],
        "--noise-multiplier", "not both"),
    cli("account", "laplace with --noise-multiplier and --epsilon", A + ["laplace", "--noise-multiplier",
                                                                         "1", "--epsilon", "2"],
        "--epsilon", "laplace's scale"),
    cli("account", "gaussian with --sample-rate (ignored)", A + ["gaussian", "--noise-multiplier", "1",
                                                                "--sample-rate", "0.1"],
        "--sample-rate", "does not use it"),
    cli("account", "heterpoisson --M 0.5 (train refuses M < 1)",
        A + ["heterpoisson", "--q-b", "0.1", "--M", "0.5", "--num-nodes", "100", "--noise-multiplier", "2"],
        "--neighbor-multiplier", "[1, inf)"),
    cli("account", "--steps 1000000000000 (asked numpy for 226 GiB)",
        A + ["dpsgd", "--sample-rate", "0.01", "--noise-multiplier", "1.1", "--steps", "1000000000000"],
        "--steps", "grid points", "RDP accountant"),
    cli("account", "heterpoisson --num-nodes 1000000000 (killed for memory; now computed)",
        A + ["heterpoisson", "--q-b", "0.001", "--M", "2", "--num-nodes", "1000000000",
             "--noise-multiplier", "2", "--steps", "100", "--delta", "1e-10"], "epsilon = 0.89",
        outcome="ok"),
]


# -- set-ups and data mutations -----------------------------------------------------------------

def _record(run_id: str, **extra):
    from gnnprivacy.reporting.record import RunRecord

    return RunRecord(run_id=run_id, method="gcn", dataset="csbm", config={"method": "gcn", "dataset": "csbm"},
                     seeds={"run": 0, "split": 0}, epsilon=math.inf, delta=None, privacy={"private": False},
                     metrics={"test_accuracy": 0.5}, timings={"total_seconds": 1.0}, versions={}, git_commit=None,
                     **extra)


def setup_good_record(tmp: Path) -> None:
    _record("ok-run").save(tmp / "runs")


def setup_truncated_record(tmp: Path) -> None:
    setup_good_record(tmp)
    text = json.dumps(_record("broken").to_dict())
    (tmp / "runs" / "broken.json").write_text(text[: len(text) // 2])


def setup_keyless_record(tmp: Path) -> None:
    setup_good_record(tmp)
    (tmp / "runs" / "keyless.json").write_text(json.dumps({"run_id": "keyless", "method": "gcn", "dataset": "x"}))


def setup_corrupt_failure(tmp: Path) -> None:
    setup_good_record(tmp)
    (tmp / "runs" / "bad.failed.json").write_text('{"run_id": ')


def setup_empty_dir(tmp: Path) -> None:
    (tmp / "empty").mkdir()


def setup_good_and_empty(tmp: Path) -> None:
    setup_good_record(tmp)
    setup_empty_dir(tmp)


def api_truncated_not_finished(tmp: Path) -> str:
    import warnings

    from gnnprivacy.experiments.store import ResultStore

    store = ResultStore(tmp / "runs")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = store.completed_ids()
    assert done == {"ok-run"} and not store.has_record("broken")
    return " ".join(str(w.message) for w in caught)


def _train_with_cache(tmp: Path, edit) -> str:
    """Train dpmlp twice with a private accounting cache, ``edit``-ing its calibration entry
    in between; the second run's output (errors raise ``ValueError`` with it)."""
    from click.testing import CliRunner

    from gnnprivacy.cli import main
    from gnnprivacy.training.node_dp import _privacy

    env = {"GNNPRIVACY_ACCOUNTING_CACHE": str(tmp / "cache")}
    args = ["train", "--method", "dpmlp", "--dataset", "csbm", "--dataset-args", "num_nodes=300",
            "--epsilon", "8", "--runs-dir", str(tmp / "runs")]      # (-q silences warnings)
    _privacy.calibrate.cache_clear()
    try:
        assert CliRunner().invoke(main, args, env=env).exit_code == 0
        for path in (tmp / "cache").glob("calibration-*.json"):
            edit(path)
        _privacy.calibrate.cache_clear()
        out = CliRunner().invoke(main, args, env=env)
    finally:
        _privacy.calibrate.cache_clear()
    if out.exit_code != 0:
        raise ValueError(out.output)
    return out.output


def api_edited_cache(tmp: Path) -> str:
    def edit(path):
        stored = json.loads(path.read_text())
        stored["value"]["noise_multiplier"] = 0.05
        path.write_text(json.dumps(stored))
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = _train_with_cache(tmp, edit)
    return text + " ".join(str(w.message) for w in caught)


def api_forged_cache(tmp: Path) -> str:
    from gnnprivacy.accounting import disk_cache

    def forge(path):
        value = {"noise_multiplier": 0.05}
        path.write_text(json.dumps({"value": value, "sha256": disk_cache._json_digest(  # noqa: SLF001
            path.stem, value)}))
    return _train_with_cache(tmp, forge)


def api_read_truncated(tmp: Path) -> str:
    from gnnprivacy.reporting.record import read_record

    read_record(tmp / "runs" / "broken.json")
    return ""


def base_graph():
    import torch
    from torch_geometric.data import Data

    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([0, 1, 0, 1, 0, 1])
    edge_index = torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]])
    train = torch.tensor([True, True, True, False, False, False])
    val = torch.tensor([False, False, False, True, False, False])
    test = torch.tensor([False, False, False, False, True, True])
    return Data(x=x, y=y, edge_index=edge_index, train_mask=train, val_mask=val, test_mask=test)


def _mutations():
    import torch

    def setx(v):
        return lambda d: setattr(d, "x", v)

    return {
        "nan_x": lambda d: d.x.__setitem__((0, 1), float("nan")),
        "inf_x": lambda d: d.x.__setitem__((2, 0), float("inf")),
        "x_1d": setx(torch.zeros(6)),
        "x_int": setx(torch.zeros(6, 3, dtype=torch.long)),
        "x_none": setx(None),
        "x_empty": setx(torch.zeros(6, 0)),
        "y_float": lambda d: setattr(d, "y", d.y.float()),
        "y_short": lambda d: setattr(d, "y", d.y[:4]),
        "y_negative": lambda d: d.y.__setitem__(0, -1),
        "ei_3": lambda d: setattr(d, "edge_index", torch.zeros(3, 2, dtype=torch.long)),
        "ei_float": lambda d: setattr(d, "edge_index", d.edge_index.float()),
        "ei_range": lambda d: d.edge_index.__setitem__((1, 0), 6),
        "ei_negative": lambda d: d.edge_index.__setitem__((0, 0), -1),
        "mask_int": lambda d: setattr(d, "train_mask", d.train_mask.long()),
        "mask_short": lambda d: setattr(d, "train_mask", d.train_mask[:5]),
        "mask_overlap": lambda d: d.test_mask.__setitem__(0, True),
        "mask_train_empty": lambda d: d.train_mask.fill_(False),
        "mask_test_empty": lambda d: d.test_mask.fill_(False),
        "mask_missing": lambda d: delattr(d, "train_mask"),
        "one_class": lambda d: d.y.__setitem__(slice(0, 3), 1),
        "bad_task": lambda d: None,
    }


def run_case(case: Case, tmp: Path) -> tuple[bool, str]:
    """Run ``case`` in the scratch folder ``tmp``; returns ``(failed, message)``.

    ``failed`` is True for a non-zero exit code / an exception of the expected kind.
    """
    for name, text in case.files.items():
        (tmp / name).write_text(text)
    if case.setup:
        globals()[f"setup_{case.setup}"](tmp)
    if case.kind == "data":
        from gnnprivacy.datasets import validate_data

        d = base_graph()
        _mutations()[case.args[0]](d)
        try:
            validate_data(d, task="regression" if case.args[0] == "bad_task" else "node_classification")
        except ValueError as exc:
            return True, str(exc)
        return False, ""
    if case.kind == "api":
        try:
            return False, globals()[f"api_{case.args[0]}"](tmp)
        except ValueError as exc:
            return True, str(exc)
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    args = [a.replace("{tmp}", str(tmp)) for a in case.args]
    out = CliRunner().invoke(main, args, catch_exceptions=True)
    text = out.output + (out.stderr if out.stderr_bytes is not None else "")
    if out.exception is not None and not isinstance(out.exception, SystemExit):
        import traceback

        text += "".join(traceback.format_exception(out.exception))
    return out.exit_code != 0, text


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, tmp_path, monkeypatch):
    if "on CPU-only torch" in case.text:
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("CUDA is available here")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GNNPRIVACY_DATA", raising=False)
    failed, message = run_case(case, tmp_path)
    assert "Traceback" not in message, message
    if case.outcome == "error":
        assert failed, f"accepted silently: {message}"
    else:
        assert not failed, message
    for fragment in case.expect:
        assert fragment in message, (fragment, message)


def test_the_table_has_at_least_60_rows_and_unique_ids():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


def render_table() -> str:
    """``docs/bad-inputs.md``, generated from :data:`CASES`."""
    errors = sum(c.outcome == "error" for c in CASES)
    handled = sum(c.outcome == "ok" for c in CASES)
    lines = [
        "# Bad inputs and what happens",
        "",
        "Every bad input we tried against gnnprivacy, and its outcome. Each row is a test in",
        "`tests/test_bad_inputs.py` (this page is generated from that list:",
        "`python tests/test_bad_inputs.py --write`; a test fails when it is out of date).",
        "",
        f"**{len(CASES)} bad inputs: {errors} clear errors, {len(CASES) - errors - handled} warnings that skip "
        f"the bad part and keep the rest, {handled} computed correctly, 0 silent wrong results, 0 tracebacks.**",
        "",
        "- *error*: the command exits non-zero (the Python call raises a `ValueError` subclass, usually "
        "`gnnprivacy.errors.InvalidParameterError`) with a one-line message naming the parameter, what was "
        "expected and what was received; the message contains the fragments shown.",
        "- *warning*: the command succeeds on the valid input and prints a warning naming what it skipped.",
        "- *ok*: an extreme but legal input that once failed; the command now computes it (the output "
        "contains the fragments shown).",
        "",
        "| # | where | bad input | outcome | the message contains |",
        "|---|---|---|---|---|",
    ]
    for i, c in enumerate(CASES, 1):
        frags = ", ".join(f"`{f}`" for f in c.expect).replace("|", "\\|")
        lines.append(f"| {i} | {c.area} | {c.text.replace('|', chr(92) + '|')} | {c.outcome} | {frags} |")
    return "\n".join(lines) + "\n"


def test_table_is_up_to_date():
    assert DOC.is_file() and DOC.read_text(encoding="utf-8") == render_table(), \
        "docs/bad-inputs.md is stale: run python tests/test_bad_inputs.py --write"


if __name__ == "__main__":
    if "--write" in sys.argv:
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(render_table(), encoding="utf-8")
        print(f"wrote {DOC} ({len(CASES)} rows)")
