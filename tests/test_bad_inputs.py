"""The bad-input table (issue 10): every bad input we tried, with its outcome, as one test each.

:data:`CASES` is the single source: each case is one test (``test_bad_input``) and one row of
``docs/bad-inputs.md``, which is generated from it (``python tests/test_bad_inputs.py --write``)
and checked to be up to date by ``test_table_is_up_to_date``, so table and tests cannot drift.

Outcomes:

- ``error``: the command exits non-zero (the API call raises a ``ValueError`` subclass) with a
  message containing every ``expect`` fragment and no traceback;
- ``warning``: the command succeeds with the valid part of the input, and says on stderr
  which part it skipped (the fragments);
- ``handled``: the input is unusual but legal, and the command does the right thing with it
  (its output, or the API function's checks, show it: the fragments).

Goal: 100 % clear errors, 0 silent wrong results (no case may pass with exit code 0 unless its
outcome is ``warning`` or ``handled``).

:data:`FAULTS` lists the faults of the machine (a full disk, a read-only folder, signals) with
the test in ``tests/experiments/test_faults.py`` that covers each; they are the "Faults" section
of the same page.
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


# -- issue 24: options that contradict each other, unusual graphs, damaged records and caches --
TQ = ["train", "--dataset", "csbm", "--dataset-args", SMALL, "--epochs", "2", "-q", "--runs-dir", "{tmp}/runs"]
TV = [a for a in TQ if a != "-q"]  # -q silences warnings
LS = ["attack", "link-stealing", "--dataset", "csbm", "-q", "--runs-dir", "{tmp}/runs"]
TUNE_BASE = ("name: t\nbase: {method: dpmlp, dataset: csbm, dataset_args: 'num_nodes=120', val_frac: 0.2}\n"
             "grid: {lr: [0.1]}\nepsilon: 4\n")


def api(area, text, name, *expect, outcome="error", setup=None):
    return Case(area, text, "api", (name,), tuple(expect), outcome, {}, setup)


def records(text, setup, *expect, command="results"):
    args = ["results", "{tmp}/runs"] if command == "results" else ["report", "{tmp}/runs", "-o", "{tmp}/out"]
    return cli("records", text, args, *expect, setup=setup, outcome="warning")


CASES += [
    cli("config file", "-c with method: [gcn] (a list)", T + ["-c", "{tmp}/c.yaml"], "method", "a string",
        files={"c.yaml": "method: [gcn]\n"}),
    cli("config file", "-c with dataset_args as a list", T[:3] + ["--epochs", "2", "-q", "-c", "{tmp}/c.yaml"],
        "dataset_args", "[1, 2]", files={"c.yaml": "dataset_args: [1, 2]\n"}),
    cli("config file", "-c with dataset_args as a mapping (read as key=value pairs)",
        ["train", "-c", "{tmp}/c.yaml", "--print-config"], "dataset_args: num_nodes=90,num_features=8",
        files={"c.yaml": "dataset: csbm\ndataset_args: {num_nodes: 90, num_features: 8}\n"}, outcome="handled"),
    cli("config file", "-c with a key given twice", T + ["-c", "{tmp}/c.yaml"], "'epochs' is given twice",
        "line 2", files={"c.yaml": "epochs: 2\nepochs: 3\n"}),
    cli("config file", "-c naming a binary file", T + ["-c", "{tmp}/c.bin"], "c.bin", "UTF-8", setup="binary_config"),
    api("config file", "--print-config output of Cora fed back with -c", "print_config_round_trip",
        "split: public", outcome="handled"),
    cli("train output", "--runs-dir ''", T + ["--runs-dir", ""], "runs_dir", "non-empty"),
    cli("train output", "RUNS/checkpoints is a file (heterpoisson): refused before training",
        TQ + ["--method", "heterpoisson"], "checkpoints", "existing file", setup="checkpoints_file"),
    cli("train options", "--resume with gcn (it writes no checkpoint)", TQ + ["--resume"], "resume", "gcn"),
    cli("train options", "--resume without a checkpoint (trains from step 0)", TV + ["--method", "heterpoisson",
                                                                                   "--resume"],
        "no checkpoint of this configuration", "step 0", outcome="warning"),
    cli("train options", "--resume with changed --steps (names the checkpoint's options)",
        TV + ["--method", "heterpoisson", "--steps", "2", "--resume"], "another configuration",
        "steps 3 there, 2 here",
        setup="other_checkpoint", outcome="warning"),
    cli("train privacy", "--epsilon 4e14 (heterpoisson: exp(epsilon) overflows the accountant)",
        TQ + ["--method", "heterpoisson", "--epsilon", "4e14"], "epsilon", "supported range"),
    cli("train options", "duplicate --dataset-args keys", ["train", "--dataset-args", "num_nodes=90,num_nodes=80", "-q"],
        "dataset_args", "given twice"),
    cli("train split", "--split-seed with a public split (Cora)", ["train", "--dataset", "cora", "--split-seed", "3",
                                                                 "-q"], "split_seed", "public split"),
    api("train options", "--dataset CORA (recorded as cora)", "dataset_case", "cora", outcome="handled"),
    cli("train options", "--mcmc-steps 0 (edgerr)", TQ + ["--method", "edgerr", "--mcmc-steps", "0"], "mcmc_steps",
        "[1, inf]"),
    cli("link stealing", "--defense none --theta 0.1 (a GRID option)", LS + ["--defense", "none", "--theta", "0.1"],
        "theta", "defense is 'grid'"),
    cli("link stealing", "--query-node a on a 2-layer sage", LS + ["--model", "sage", "--influence", "infiltrator",
                                                                  "--query-node", "a"], "query_node", "2 message-passing layers"),
    cli("linkteller", "--eps-e 1 with the gcn victim (no edge privacy)",
        ["attack", "linkteller", "--dataset", "csbm", "--method", "gcn", "--eps-e", "1", "-q"], "eps_e", "clean"),
    cli("audit", "--degrees abc", ["audit", "--method", "heterpoisson", "--degrees", "abc"], "degrees", "integers"),
    cli("audit", "-p lr (no value)", ["audit", "--method", "heterpoisson", "-p", "lr"], "-p/--param", "KEY=VALUE"),
    cli("tune", "trials.mean: 0", ["tune", "-c", "{tmp}/t.yaml", "--runs-dir", "{tmp}/runs"], "trials.mean",
        files={"t.yaml": TUNE_BASE + "trials: {mean: 0}\n"}),
    api("tune", "the same name run again (would overwrite its record and mix trials)", "tune_twice",
        "not yet used", "tune-t.json"),
    cli("reproduce", "--list with an empty data root", ["reproduce", "--list", "--data-root", "{tmp}/empty"],
        "runnable: no", "raw files missing", setup="empty_dir", outcome="handled"),
    cli("demo", "-o under a file (refused before the first run trains)", ["demo", "-q", "--runs-dir", "{tmp}/runs",
                                                                          "-o", "{tmp}/afile/report"],
        "-o/--output", "afile is a file", files={"afile": "x"}),
    cli("results", "-o into a missing folder", ["results", "{tmp}/runs", "-o", "{tmp}/nowhere/x.csv"], "-o/--output",
        "does not exist", setup="good_record"),
    api("data (gp.train)", "y as int32 (widened to int64)", "y_int32", "ok", outcome="handled"),
    api("data (gp.train)", "sparse x (made dense)", "x_sparse", "ok", outcome="handled"),
    api("data (gp.train)", "x on the meta device", "x_meta", "x", "meta device"),
    api("data (gp.train)", "num_nodes differing from the rows of x", "num_nodes_differs", "num_nodes", "rows of x"),
    api("data (gp.train)", "gp.train(None)", "train_none", "data", "None"),
    api("data (gp.train)", "data.name = '../../x' (stays inside the runs dir)", "name_with_slashes", "inside",
        outcome="handled"),
    api("data (gp.train)", "data.name = 'cora' on a 60-node graph, then assess", "assess_user_graph",
        "user-supplied graph", "cora"),
    api("data (gp.train)", "a 4-node graph with heterpoisson (delta 0.218)", "tiny_graph_delta", "delta = 0.218",
        "4 nodes", outcome="warning"),
    records("a record with metrics: [1]", "record_metrics_list", "metrics is [1]", "not a mapping", "ok-run"),
    records("a record with seeds: [0]", "record_seeds_list", "seeds is [0]", "not a mapping", "ok-run"),
    records("a record with info: 'x'", "record_info_str", "info is 'x'", "not a mapping", "ok-run"),
    records("a record with epsilon 'abc' (report)", "record_epsilon_str", "epsilon is 'abc'", "not a number",
            command="report"),
    records("a record with test_accuracy 'nan' (report)", "record_accuracy_nan", "test_accuracy", "not finite",
            "1 of 2 run", command="report"),
    records("a record whose split is truncated (a full disk)", "record_split_truncated", "companion",
            "truncated", "ok-run"),
    records("the same configuration and seed twice (report counts it once)", "record_repeated",
            "counted once", command="report"),
    api("datasets", "a truncated processed PyG cache (Cora)", "damaged_processed_cache", "damaged",
        "rebuilding", outcome="warning"),
    cli("datasets", "a corrupt raw file (Cora's ind.cora.x truncated)", ["datasets", "--data-root", "{tmp}/root"],
        "corrupt", "ind.cora.x", setup="corrupt_raw_cora", outcome="handled"),
    # -- predict on another graph (issue 24), assess of a tune record ---------------------------
    api("predict (gp.train(...).predict)", "a new graph without masks (heterpoisson: every node "
        "queried)", "predict_no_masks", "rows 60", outcome="handled"),
    api("predict (gp.train(...).predict)", "float64 features (converted, same predictions)",
        "predict_float64", "same", outcome="handled"),
    api("predict (gp.train(...).predict)", "a wrong feature dimension", "predict_wrong_dim",
        "data.x", "4 features per node"),
    api("predict (gp.train(...).predict)", "an edge id beyond the nodes", "predict_bad_edge",
        "data.edge_index", "[0, 60)"),
    api("predict (gp.train(...).predict)", "NaN features", "predict_nan", "data.x", "finite"),
    api("predict (gp.train(...).predict)", "a directed graph (symmetrised as training graphs are)",
        "predict_directed", "symmetrised", outcome="warning"),
    cli("assess", "a tune record (the chosen model; the claim is the tuned total)",
        ["assess", "{tmp}/tr/tune-t.json", "--no-link-stealing", "--no-baseline", "--audit-runs",
         "200"], "Tuned", "total", setup="tune_record", outcome="handled"),
    # -- make_private (issue 23) ----------------------------------------------------------------
    api("make_private", "BatchNorm in the model", "mp_batchnorm", "BatchNorm1d", "LayerNorm"),
    api("make_private", "a batch from another DataLoader", "mp_foreign_batch",
        "did not use the batch from pt.loader"),
    api("make_private", "a model whose output rows match no subgraph", "mp_wrong_rows",
        "154 rows", "one row per node"),
    api("make_private", "an optimizer over parameters the model does not have", "mp_foreign_params",
        "optimizer", "not in the model"),
    api("make_private", "an edge joining two subgraphs of a batch", "mp_cross_edge",
        "joins subgraph"),
    api("DPEngine", "an accountant event without a declared sampling (a shuffled DataLoader "
        "accounted as Poisson)", "engine_no_sampling", "sampling", "how its batches are drawn"),
    # -- link stealing: the protocol and the reference MLP's labels (issue 27) --------------------
    cli("link stealing", "--reference-label-frac 0", LS + ["--attack", "6", "--reference-label-frac", "0"],
        "reference_label_frac", "(0, 1]"),
    cli("link stealing", "--reference-label-frac 1.5", LS + ["--attack", "6", "--reference-label-frac", "1.5"],
        "reference_label_frac", "(0, 1]"),
    cli("link stealing", "--reference-label-frac with attack 0 (no reference MLP)",
        LS + ["--attack", "0", "--reference-label-frac", "0.5"], "reference_label_frac", "attack 2, 5, 6 or 7"),
    cli("link stealing", "--protocol he-full with the inductive ILS attack",
        LS + ["--model", "sage", "--ils", "A2", "--protocol", "he-full"], "protocol", "'d1'"),
    cli("link stealing", "--protocol full (unknown)", LS + ["--protocol", "full"], "--protocol", "he-full"),
]


# -- set-ups and data mutations -----------------------------------------------------------------

def _record(run_id: str, **extra):
    from gnnprivacy.records.record import RunRecord

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

    from gnnprivacy.records.store import ResultStore

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
    from gnnprivacy.training import _privacy

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
    from gnnprivacy.records.record import read_record

    read_record(tmp / "runs" / "broken.json")
    return ""


def _write_record(tmp: Path, name: str, **changes) -> None:
    """A good record ``ok-run`` and ``name`` = a copy of it with ``changes`` to its JSON."""
    setup_good_record(tmp)
    data = {**json.loads((tmp / "runs" / "ok-run.json").read_text()), "run_id": name, **changes}
    (tmp / "runs" / f"{name}.json").write_text(json.dumps(data))


def setup_record_metrics_list(tmp: Path) -> None:
    _write_record(tmp, "bad", metrics=[1])


def setup_record_seeds_list(tmp: Path) -> None:
    _write_record(tmp, "bad", seeds=[0])


def setup_record_info_str(tmp: Path) -> None:
    _write_record(tmp, "bad", info="x")


def setup_record_epsilon_str(tmp: Path) -> None:
    _write_record(tmp, "bad", epsilon="abc")


def setup_record_accuracy_nan(tmp: Path) -> None:
    _write_record(tmp, "nan-run", metrics={"test_accuracy": "nan"}, seeds={"run": 1, "split": 1},
                  config={"method": "gcn", "dataset": "csbm", "seed": 1})


def setup_record_repeated(tmp: Path) -> None:
    _write_record(tmp, "again")  # same configuration and seeds as ok-run


def setup_record_split_truncated(tmp: Path) -> None:
    """``broken`` was published with its split, which a full disk then truncated."""
    from gnnprivacy.datasets.splits import random_split
    from gnnprivacy.records.store import ResultStore

    setup_good_record(tmp)
    split = random_split(20, seed=0, dataset="csbm")
    ResultStore(tmp / "runs").publish(_record("broken"), {"broken.split.npz": split.save})
    path = tmp / "runs" / "broken.split.npz"
    path.write_bytes(path.read_bytes()[:100])


def setup_binary_config(tmp: Path) -> None:
    (tmp / "c.bin").write_bytes(bytes(range(256)) * 4)


def setup_checkpoints_file(tmp: Path) -> None:
    (tmp / "runs").mkdir()
    (tmp / "runs" / "checkpoints").write_text("x")


def setup_other_checkpoint(tmp: Path) -> None:
    """A checkpoint (and its description) of the same run with --steps 3."""
    from gnnprivacy.method.config import resolve_config
    from gnnprivacy.method.runner import checkpoint_path_for, describe_checkpoint

    config, params = resolve_config({"method": "heterpoisson", "dataset": "csbm", "dataset_args": SMALL,
                                     "epochs": 2, "steps": 3, "runs_dir": str(tmp / "runs")})
    ckpt = checkpoint_path_for(config, params)
    describe_checkpoint(ckpt, config, params)
    ckpt.write_bytes(b"a checkpoint")


def shared_datasets() -> Path:
    import os

    root = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
    if not (root / "Cora" / "raw").is_dir():
        pytest.skip("needs the shared datasets (Cora)")
    return root


def setup_corrupt_raw_cora(tmp: Path) -> None:
    import shutil

    shutil.copytree(shared_datasets() / "Cora", tmp / "root" / "Cora")
    path = tmp / "root" / "Cora" / "raw" / "ind.cora.x"
    path.write_bytes(path.read_bytes()[:100])


def api_print_config_round_trip(tmp: Path) -> str:
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    root = str(shared_datasets())
    first = CliRunner().invoke(main, ["train", "--dataset", "cora", "--data-root", root, "--print-config"])
    assert first.exit_code == 0, first.output
    (tmp / "back.yaml").write_text(first.output)
    again = CliRunner().invoke(main, ["train", "-c", str(tmp / "back.yaml"), "--print-config"])
    assert again.exit_code == 0 and again.output == first.output, again.output
    return again.output


def api_dataset_case(tmp: Path) -> str:
    from gnnprivacy.method.config import resolve_config

    return resolve_config({"dataset": "CORA"})[0].dataset


def api_tune_twice(tmp: Path) -> str:
    from gnnprivacy.experiments.tune import tune

    spec = {"name": "t", "base": {"method": "dpmlp", "dataset": "csbm", "dataset_args": "num_nodes=120",
                                  "val_frac": 0.2, "epochs": 1},
            "grid": {"lr": [0.1]}, "epsilon": 4.0, "trials": {"distribution": "poisson", "mean": 1.0},
            "compare": False}
    tune(spec, runs_dir=tmp / "runs")
    first = (tmp / "runs" / "tune-t.json").read_bytes()
    try:
        tune(spec, runs_dir=tmp / "runs")
    finally:
        assert (tmp / "runs" / "tune-t.json").read_bytes() == first  # the first tune is intact
    return ""


def _graph(n=60, **changes):
    import torch
    from torch_geometric.data import Data

    gen = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(n, 4, generator=gen), y=torch.arange(n) % 2,
                edge_index=torch.randint(0, n, (2, 3 * n), generator=gen))
    for key, value in changes.items():
        setattr(data, key, value)
    return data


def _train_user(data, **kw):
    import gnnprivacy as gp

    return gp.train(data, **{"epochs": 2, **kw})


def _trained_heterpoisson():
    return _train_user(_graph(), method="heterpoisson", epochs=1)


def api_predict_no_masks(tmp: Path) -> str:
    result = _trained_heterpoisson()
    logits = result.predict(_graph())                 # a fresh graph: no masks at all
    return f"rows {logits.shape[0]}"


def api_predict_float64(tmp: Path) -> str:
    import torch

    result = _train_user(_graph(), method="gcn")
    same = torch.allclose(result.predict(_graph()), result.predict(_graph(x=_graph().x.double())))
    return "same" if same else "different"


def api_predict_wrong_dim(tmp: Path) -> str:
    import torch

    _train_user(_graph(), method="gcn").predict(_graph(x=torch.randn(60, 5)))
    return ""


def api_predict_bad_edge(tmp: Path) -> str:
    import torch

    _train_user(_graph(), method="gcn").predict(_graph(edge_index=torch.tensor([[0], [60]])))
    return ""


def api_predict_nan(tmp: Path) -> str:
    x = _graph().x.clone()
    x[3, 1] = float("nan")
    _train_user(_graph(), method="gcn").predict(_graph(x=x))
    return ""


def api_predict_directed(tmp: Path) -> str:
    import torch

    _train_user(_graph(), method="gcn").predict(_graph(edge_index=torch.tensor([[0, 1], [1, 2]])))
    return "ok"


def setup_tune_record(tmp: Path) -> None:
    from gnnprivacy.experiments.tune import tune

    tune({"name": "t", "base": {"method": "dpmlp", "dataset": "csbm",
                                "dataset_args": "num_nodes=120", "val_frac": 0.2, "epochs": 1},
          "grid": {"lr": [0.1]}, "epsilon": 4.0, "compare": False}, runs_dir=str(tmp / "tr"))


def _mp(model, *, sampler="heterpoisson", opt=None):
    import torch

    import gnnprivacy as gp

    data = gp.load_dataset("csbm", num_nodes=200)
    opt = opt if opt is not None else torch.optim.SGD(model.parameters(), lr=0.1)
    return data, opt, gp.make_private(model, opt, data, sampler=sampler, noise_multiplier=1.0,
                                      steps=3, seed=0)


class _Sage(__import__("torch").nn.Module):
    def __init__(self, rows_extra: int = 0):
        import torch
        from torch_geometric.nn import SAGEConv

        super().__init__()
        self.conv, self.head, self.extra = SAGEConv(32, 8), torch.nn.Linear(8, 4), rows_extra

    def forward(self, x, edge_index):
        import torch

        h = self.conv(x, edge_index)
        return self.head(torch.cat([h, h[:self.extra]]) if self.extra else h)


def _mp_loop(pt, model, opt, edge_index=None):
    from torch.nn import functional as F

    for batch in pt.loader:
        opt.zero_grad()
        ei = batch.edge_index if edge_index is None else edge_index(batch)
        out = model(batch.x, ei)
        F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
        opt.step()


def api_mp_batchnorm(tmp: Path) -> str:
    import torch

    _mp(torch.nn.Sequential(torch.nn.Linear(32, 8), torch.nn.BatchNorm1d(8)))
    return ""


def api_mp_foreign_batch(tmp: Path) -> str:
    from torch.nn import functional as F

    model = _Sage()
    data, opt, pt = _mp(model)
    next(iter(pt.loader))
    opt.zero_grad()
    F.cross_entropy(model(data.x[:20].clone(), data.edge_index[:, :0])[:5], data.y[:5]).backward()
    opt.step()
    return ""


def api_mp_wrong_rows(tmp: Path) -> str:
    model = _Sage(rows_extra=1)
    _, opt, pt = _mp(model)
    _mp_loop(pt, model, opt)
    return ""


def api_mp_foreign_params(tmp: Path) -> str:
    import torch

    model, other = _Sage(), torch.nn.Linear(2, 2)
    _mp(model, opt=torch.optim.SGD(list(model.parameters()) + list(other.parameters()), lr=0.1))
    return ""


def api_mp_cross_edge(tmp: Path) -> str:
    import torch

    model = _Sage()
    _, opt, pt = _mp(model)
    _mp_loop(pt, model, opt, edge_index=lambda b: torch.cat(
        [b.edge_index, torch.stack([b.center[:1], b.center[1:2]])], 1))
    return ""


def api_engine_no_sampling(tmp: Path) -> str:
    import torch
    from dp_accounting import dp_event

    from gnnprivacy.accounting import make_accountant
    from gnnprivacy.training.dp import DPEngine

    model = torch.nn.Linear(3, 2)
    DPEngine(model, torch.optim.SGD(model.parameters(), lr=0.1), clip_norm=1.0,
             noise_multiplier=1.0, expected_batch_size=4.0, generator=torch.Generator(),
             accountant=make_accountant("pld"),
             step_event=dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(1.0)))
    return ""


def api_y_int32(tmp: Path) -> str:
    import torch

    data = _graph()
    data.y = data.y.to(torch.int32)
    result = _train_user(data)
    assert data.y.dtype == torch.int32 and result.data.y.dtype == torch.int64  # the user's object untouched
    return "ok"


def api_x_sparse(tmp: Path) -> str:
    import torch

    data = _graph()
    dense = _train_user(data).metrics
    data.x = data.x.to_sparse()
    assert _train_user(data).metrics == dense and data.x.layout == torch.sparse_coo
    return "ok"


def api_x_meta(tmp: Path) -> str:
    import torch

    _train_user(_graph(x=torch.empty(60, 4, device="meta")))
    return ""


def api_num_nodes_differs(tmp: Path) -> str:
    _train_user(_graph(num_nodes=100))
    return ""


def api_train_none(tmp: Path) -> str:
    _train_user(None)
    return ""


def api_name_with_slashes(tmp: Path) -> str:
    runs = tmp / "deep" / "runs"
    result = _train_user(_graph(name="../../x"), runs_dir=str(runs))
    files = [p for p in tmp.rglob("*.json")]
    assert files and all(p.parent == runs for p in files), files
    assert "/" not in result.record.run_id
    return "inside the runs dir"


def api_assess_user_graph(tmp: Path) -> str:
    from gnnprivacy.auditing.report_card import report_card

    result = _train_user(_graph(name="cora"), method="dpmlp", runs_dir=str(tmp / "runs"))
    report_card(result.record, link_stealing=False, baseline=False)
    return ""


def api_tiny_graph_delta(tmp: Path) -> str:
    import torch

    data = _graph(4, y=torch.tensor([0, 1, 0, 1]), edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]),
                  train_mask=torch.tensor([True, True, False, False]),
                  test_mask=torch.tensor([False, False, True, True]))
    result = _train_user(data, method="heterpoisson", epochs=1)
    return " ".join(result.record.info["warnings"])


def api_damaged_processed_cache(tmp: Path) -> str:
    import os
    import warnings

    from gnnprivacy.datasets import load_dataset

    root, old = shared_datasets(), os.environ.get("GNNPRIVACY_CACHE")
    os.environ["GNNPRIVACY_CACHE"] = str(tmp / "cache")
    try:
        first = load_dataset("cora", root=root)
        processed = next((tmp / "cache").rglob("processed/data.pt"))
        processed.write_bytes(processed.read_bytes()[:1000])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            again = load_dataset("cora", root=root)
        assert bool((again.x == first.x).all()) and processed.stat().st_size > 1000  # rebuilt
        return " ".join(str(w.message) for w in caught)
    finally:
        if old is None:
            os.environ.pop("GNNPRIVACY_CACHE")
        else:
            os.environ["GNNPRIVACY_CACHE"] = old


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


# -- issue 35: nothing the user points at is destroyed, no setting silently replaced, damaged inputs
# refused, every size bounded, messages that say what to write -------------------------------------
CASES += [
    cli("train output", "--save-model naming another run's record (turned it into a zip)",
        TQ + ["--save-model", "{tmp}/runs/ok-run.json"], "--save-model", "existing run record", "--force",
        setup="good_record"),
    cli("train output", "--save-model --json (the model went to a file named --json)",
        TQ + ["--save-model", "--json"], "--save-model", "not an option"),
    cli("predict", "-o naming the model being read", ["predict", "{tmp}/m.model.pt", "-o", "{tmp}/m.model.pt"],
        "-o/--output", "the one this command reads", setup="saved_model"),
    cli("results", "-o naming a saved model", ["results", "{tmp}/runs", "-o", "{tmp}/m.model.pt"],
        "-o/--output", "existing saved model", "--force", setup="saved_model"),
    cli("results", "-o naming an existing file of the user's (replaced, and said so)",
        ["results", "{tmp}/runs", "-o", "{tmp}/afile"], "replacing the existing file", files={"afile": "x"},
        setup="good_record", outcome="warning"),
    api("train output", "TrainResult.save over a run record", "save_over_record", "path",
        "existing run record"),
    api("accounting", "Accountant.save / Ledger.save over a run record (plain write_text)",
        "accountant_save_over_record", "path", "existing run record", "--force"),
    cli("report", "-o folder holding the user's own report.md (was replaced silently)",
        ["report", "{tmp}/runs", "-o", "{tmp}/out"], "output", "report.md that gnnprivacy did not write",
        "--force", files={"out/report.md": "my notes"}, setup="good_record"),
    cli("report", "-o naming the runs directory it reads", ["report", "{tmp}/runs", "-o", "{tmp}/runs"],
        "output", "other than the runs directory", setup="good_record"),
    api("report", "a PNG of the user's in plots/ (the plot writer deleted every *.png it had not just "
        "written)", "report_keeps_stray_plot", "plots/mine.png kept", "its own stale plot removed",
        outcome="handled"),
    cli("demo", "-o folder holding the user's own report.html (refused before any training)",
        ["demo", "--runs-dir", "{tmp}/runs", "-o", "{tmp}/out"], "report.html that gnnprivacy did not write",
        "--force", files={"out/report.html": "<p>mine</p>"}),
    cli("reproduce", "-o folder holding the user's own report.md (refused before any run)",
        ["reproduce", "000-table2", "--quick", "--runs-dir", "{tmp}/runs", "-o", "{tmp}/out"],
        "report.md that gnnprivacy did not write", "--force", files={"out/report.md": "my notes"}),
    cli("reproduce", "--all --docs naming a hand-written page",
        ["reproduce", "--all", "--report-only", "--runs-dir", "{tmp}/runs", "-o", "{tmp}/out", "--docs",
         "{tmp}/docs/page.md"], "--docs", "page.md that gnnprivacy did not write", "--force",
        files={"docs/page.md": "hand-written"}),
]


TB35 = "name: t\nbase: {method: dpmlp, dataset: csbm, dataset_args: 'num_nodes=120', val_frac: 0.2}\nepsilon: 4\n"
TUNE35 = ["tune", "-c", "{tmp}/t.yaml", "--runs-dir", "{tmp}/runs", "--plan"]
BOMB = ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n")
CASES += [
    # class 3: a budget or setting silently replaced
    cli("config file", "-c with epsilon: (present but empty; read as the default 8)",
        TQ + ["--method", "dpmlp", "-c", "{tmp}/c.yaml"], "epsilon", "present but empty", files={"c.yaml": "epsilon:\n"}),
    cli("config file", "-c with train-frac and train_frac (both passed the duplicate check)",
        TQ + ["-c", "{tmp}/c.yaml"], "'train_frac' is given twice", "'train-frac'",
        files={"c.yaml": "train-frac: 0.5\ntrain_frac: 0.3\n"}),
    sweep("train-frac in base, train_frac in grid", "name: x\nbase: {method: gcn, train-frac: 0.5}\n"
          "grid: {train_frac: [0.3]}\n", "grid.train_frac", "base"),
    cli("config file", "dataset_args: {homophily: '0.5,num_classes=2'} (injected a key)",
        ["train", "-c", "{tmp}/c.yaml", "--print-config"], "dataset_args.homophily", "no ','",
        files={"c.yaml": "dataset: csbm\ndataset_args: {homophily: '0.5,num_classes=2'}\n"}),
    cli("tune", "base.delta (dropped: the trials ran at the default delta)", TUNE35, "at delta 0.0001",
        files={"t.yaml": TB35.replace("val_frac: 0.2", "val_frac: 0.2, delta: 0.0001") + "grid: {lr: [0.1]}\n"},
        outcome="handled"),
    cli("tune", "compare: 'no' (read as true)", TUNE35, "compare", "true or false",
        files={"t.yaml": TB35 + "grid: {lr: [0.1]}\ncompare: 'no'\n"}),
    cli("tune", "name: ../../x (wrote records outside the runs directory)", TUNE35, "name", "../../x",
        files={"t.yaml": TB35.replace("name: t", "name: ../../x") + "grid: {lr: [0.1]}\n"}),
    cli("audit", "--epsilon 8 -p epsilon=4 (one was picked silently)",
        ["audit", "--method", "dpmlp", "--epsilon", "8", "-p", "epsilon=4", "--runs", "10"], "epsilon",
        "given once"),
    cli("train options", "rgnn --num-clusters 0 (the LLP loss off while the record said alpha 1)",
        ["train", "--dataset", "csbm", "--dataset-args", "num_nodes=120,num_features=32", "--method", "rgnn",
         "--num-clusters", "0", "-q", "--runs-dir", "{tmp}/runs"], "num_clusters", "alpha"),
    api("data (gp.train)", "data.edge_weight (ignored by every method, silently)", "edge_weight",
        "data.edge_weight is ignored", outcome="warning"),
    # class 4: damaged inputs
    api("datasets", "a replaced ind.cora.y (trained a 5-node split recorded as Cora)", "cora_replaced_y",
        "public split of 5", "140"),
    api("datasets", "an emptied ind.cora.graph (trained with no edges)", "cora_emptied_graph",
        "0 edge_index columns", "10,556"),
    api("records", "a hand-edited .index.json row (a non-private run shown at epsilon 0.5)", "edited_index_row",
        "failed its checksum", "epsilon inf", outcome="warning"),
    records("a record with epsilon -5", "record_epsilon_negative", "epsilon is -5", "privacy budget", "ok-run"),
    # class 5: tracebacks and unbounded work
    cli("tune", "grid: [1, 2] (a traceback)", TUNE35, "grid", "mapping", files={"t.yaml": TB35 + "grid: [1, 2]\n"}),
    cli("tune", "trials: 5 (a traceback)", TUNE35, "trials", "mapping",
        files={"t.yaml": TB35 + "grid: {lr: [0.1]}\ntrials: 5\n"}),
    api("load", "gp.load(None) (a traceback)", "load_none", "path", "None"),
    api("load", "a forged model file", "load_forged", "path", "saved model"),
    api("predict (gp.train(...).predict)", "nodes=[10**6] (an IndexError)", "predict_far_node", "nodes",
        "[0, 60)", "1000000"),
    cli("config file", "-c with an integer key (1: 2)", TQ + ["-c", "{tmp}/c.yaml"], "keys must be names", "1",
        files={"c.yaml": "1: 2\n"}),
    cli("config file", "-c with a YAML alias bomb (rendered a 580 MB error line)", TQ + ["-c", "{tmp}/c.yaml"],
        "at most 100000 values", "alias bomb", files={"c.yaml": BOMB}),
    sweep("seeds: 100000000", "name: x\nbase: {method: gcn}\ngrid: {lr: [0.1]}\nseeds: 100000000\n", "seeds",
          "at most 100000 runs"),
    cli("audit", "--runs 1000000000", ["audit", "--method", "dpmlp", "--runs", "1000000000"], "runs",
        "[2, 1000000]"),
    cli("audit", "--degrees 1000000000 (killed for memory after 5 minutes)",
        ["audit", "--method", "heterpoisson", "--dataset", "csbm", "--degrees", "1000000000"], "degrees", "the graph has"),
    cli("train options", "--hidden 50000000", TQ + ["--hidden", "50000000"], "hidden", "at most 65,536"),
    records("a record nested 100,000 deep (made every other run unlistable)", "record_deep", "nested too deep",
            "ok-run"),
    records("a record naming a FIFO as its companion (blocked results forever)", "record_fifo",
            "not a regular file", "ok-run"),
    # class 6: misleading messages
    cli("config file", "-c with lr: 1e-3 (YAML 1.1 reads it as text)", TQ + ["-c", "{tmp}/c.yaml"], "lr",
        "write 1.0e-3", files={"c.yaml": "lr: 1e-3\n"}),
    cli("config file", "-c /dev/null (an empty configuration)", TQ + ["-c", "/dev/null", "--print-config"],
        "method: gcn", outcome="handled"),
    api("config file", "-c <(printf 'epochs: 3') (a pipe)", "config_pipe", "epochs: 3", outcome="handled"),
    api("sweep file", "a YAML merge key (<<: *small) in a grid value (refused as invalid YAML)", "sweep_merge_key",
        "lr 0.01 hidden 8", outcome="handled"),
    api("data (gp.train)", "seed=np.int64(3) (was 'not an integer')", "numpy_seed", "seed 3", outcome="handled"),
    api("data (gp.train)", "NaN in data.x (heterorr: an error about 'z')", "nan_x_featurerr", "x", "NaN"),
]


def api_edge_weight(tmp: Path) -> str:
    import torch

    _train_user(_graph(edge_weight=torch.ones(180)), method="gcn", epochs=1, runs_dir=str(tmp / "runs"))
    return ""


def _damaged_cora(tmp: Path, name: str, payload) -> str:
    import os
    import pickle
    import shutil

    from gnnprivacy.datasets import load_dataset

    shutil.copytree(shared_datasets() / "Cora", tmp / "root" / "Cora")
    with open(tmp / "root" / "Cora" / "raw" / name, "wb") as fh:
        pickle.dump(payload, fh)
    old = os.environ.get("GNNPRIVACY_CACHE")
    os.environ["GNNPRIVACY_CACHE"] = str(tmp / "cache")
    try:
        load_dataset("cora", root=tmp / "root")
    finally:
        if old is None:
            os.environ.pop("GNNPRIVACY_CACHE")
        else:
            os.environ["GNNPRIVACY_CACHE"] = old
    return "accepted"


def api_cora_replaced_y(tmp: Path) -> str:
    import numpy as np

    return _damaged_cora(tmp, "ind.cora.y", np.eye(7, dtype=np.int64)[:5])


def api_cora_emptied_graph(tmp: Path) -> str:
    return _damaged_cora(tmp, "ind.cora.graph", {})


def api_edited_index_row(tmp: Path) -> str:
    from gnnprivacy.records.store import ResultStore

    setup_good_record(tmp)
    store = ResultStore(tmp / "runs")
    store.rows()
    index = tmp / "runs" / ".index.json"
    cache = json.loads(index.read_text())
    cache["entries"]["ok-run.json"]["row"]["epsilon"] = 0.5
    index.write_text(json.dumps(cache))
    row = store.rows()[0]
    return f"epsilon {row['epsilon']}"


def setup_record_epsilon_negative(tmp: Path) -> None:
    _write_record(tmp, "bad", epsilon=-5)


def setup_record_deep(tmp: Path) -> None:
    setup_good_record(tmp)
    (tmp / "runs" / "deep.json").write_text("[" * 100_000 + "]" * 100_000)


def setup_record_fifo(tmp: Path) -> None:
    import os

    setup_good_record(tmp)
    data = json.loads((tmp / "runs" / "ok-run.json").read_text())
    os.mkfifo(tmp / "runs" / "pipe.split.npz")
    data.update(run_id="piped", files={"pipe.split.npz": {"sha256": "0" * 64, "bytes": 0}})
    (tmp / "runs" / "piped.json").write_text(json.dumps(data))


def api_load_none(tmp: Path) -> str:
    import gnnprivacy as gp

    gp.load(None)
    return ""


def api_load_forged(tmp: Path) -> str:
    import gnnprivacy as gp

    (tmp / "f.model.pt").write_bytes(b"PK\x03\x04 not a model")
    gp.load(str(tmp / "f.model.pt"))
    return ""


def api_predict_far_node(tmp: Path) -> str:
    _train_user(_graph(), method="gcn", epochs=1, runs_dir=str(tmp / "runs")).predict(_graph(), [10**6])
    return ""


def api_config_pipe(tmp: Path) -> str:
    import os

    from click.testing import CliRunner

    from gnnprivacy.cli import main

    read, write = os.pipe()  # what bash's <(printf ...) hands over: /dev/fd/N
    os.write(write, b"epochs: 3\n")
    os.close(write)
    try:
        out = CliRunner().invoke(main, ["train", "-c", f"/dev/fd/{read}", "--print-config"])
    finally:
        os.close(read)
    if out.exit_code != 0:
        raise ValueError(out.output)
    return out.output


def api_sweep_merge_key(tmp: Path) -> str:
    from gnnprivacy.experiments.sweep import load_sweep

    (tmp / "s.yaml").write_text("name: m\nbase: {method: gcn}\ngrid:\n  setting:\n"
                                "    - &small {hidden: 8, lr: 0.1}\n    - {<<: *small, lr: 0.01}\n")
    cells = load_sweep(tmp / "s.yaml").cells()
    assert cells == [{"hidden": 8, "lr": 0.1}, {"hidden": 8, "lr": 0.01}], cells
    return f"lr {cells[1]['lr']} hidden {cells[1]['hidden']}"


def api_numpy_seed(tmp: Path) -> str:
    import numpy as np

    result = _train_user(_graph(), method="gcn", epochs=1, seed=np.int64(3), runs_dir=str(tmp / "runs"))
    return f"seed {result.record.config['seed']}"


def api_nan_x_featurerr(tmp: Path) -> str:
    x = _graph().x.clone()
    x[2, 1] = float("nan")
    _train_user(_graph(x=x), method="featurerr", epochs=1, runs_dir=str(tmp / "runs"))
    return ""


def setup_saved_model(tmp: Path) -> None:
    setup_good_record(tmp)
    _train_user(_graph(), method="mlp", epochs=1, runs_dir=str(tmp / "m-runs")).save(str(tmp / "m.model.pt"))


def api_accountant_save_over_record(tmp: Path) -> str:
    from gnnprivacy.accounting import make_accountant

    setup_good_record(tmp)
    record = tmp / "runs" / "ok-run.json"
    before = record.read_bytes()
    acc = make_accountant("rdp")
    try:
        try:
            acc.ledger.save(record)
        except ValueError:
            pass
        else:
            raise AssertionError("Ledger.save replaced a run record")
        acc.save(record)
    finally:
        assert record.read_bytes() == before
    return "saved"


def api_report_keeps_stray_plot(tmp: Path) -> str:
    from gnnprivacy._files import OutputFolder
    from gnnprivacy.reporting.html import write_report

    setup_good_record(tmp)
    write_report(tmp / "runs", tmp / "out")
    mine = tmp / "out" / "plots" / "mine.png"
    mine.parent.mkdir(exist_ok=True)
    mine.write_bytes(b"\x89PNG the user's")
    stale = OutputFolder(tmp / "out", name="output").write("plots/stale.png", b"\x89PNG an old report's")
    write_report(tmp / "runs", tmp / "out")
    kept = mine.read_bytes() == b"\x89PNG the user's"
    return ("plots/mine.png kept" if kept else "plots/mine.png LOST") + (
        "; its own stale plot removed" if not stale.exists() else "; stale plot left")


def api_save_over_record(tmp: Path) -> str:
    setup_good_record(tmp)
    before = (tmp / "runs" / "ok-run.json").read_bytes()
    try:
        _train_user(_graph(), method="mlp", epochs=1, runs_dir=str(tmp / "m-runs")).save(
            str(tmp / "runs" / "ok-run.json"))
    finally:
        assert (tmp / "runs" / "ok-run.json").read_bytes() == before
    return ""


# -- issue 45: partitions and shard folders (partition, train-sharded, gp.partition) -----------
PART = ["partition", "csbm", "--dataset-args", "num_nodes=200", "--parts", "2", "--out", "{tmp}/s"]
CASES += [
    api("partition", "--out DIR --overwrite over a folder holding the user's notes.txt and a "
        "subfolder (deleted them)", "partition_keeps_user_files", "notes.txt kept",
        "mine/a.txt kept", "old part2 removed", outcome="handled"),
    cli("partition", "--overwrite into a folder holding an owner.npy that no partition wrote",
        PART + ["--overwrite"], "owner.npy that gnnprivacy did not write", files={"s/owner.npy": "x"}),
    cli("partition", "--overwrite into a folder whose meta.json is garbage", PART + ["--overwrite"],
        "its meta.json is not one", files={"s/meta.json": "{garbage"}),
    api("partition", "on a full disk (a Bus error and a half-written folder)", "partition_full_disk",
        "could not write the shards", "No space left on device", "nothing left in the folder"),
    cli("partition", "./no/such/folder (listed the dataset names)",
        ["partition", "./no/such/folder", "--parts", "2", "--out", "{tmp}/s"], "'graph'",
        "./no/such/folder (no such folder)"),
    api("gp.partition", "data with NaN x (partitioned)", "partition_nan_x", "'x'", "finite node features"),
    api("gp.partition", "data with float y (partitioned)", "partition_float_y", "'y'", "integer class labels"),
    api("gp.partition", "data with an edge id past the node count (an IndexError)", "partition_far_edge",
        "'edge_index'", "node ids in [0, 30)"),
    api("gp.partition", "gp.partition(data, out, num_parts=2) (a TypeError; the docs say num_parts)",
        "partition_num_parts", "2 parts", outcome="handled"),
    cli("partition", "a named dataset with train's split options (there were none)",
        PART + ["--train-frac", "0.3", "--seed", "3"], "60 training nodes", "70 test", outcome="handled"),
    cli("partition", "--train-fraction with a named dataset (its split was kept, the option ignored)",
        PART + ["--train-fraction", "0.2"], "'train_fraction'", "has a split"),
    api("shards", "a shards folder mixed from two partitions, 2 ranks (a gloo traceback on rank 0)",
        "shards_mixed", "the same line on both ranks", "part1 comes from another one"),
    api("shards", "a shards folder missing a part's file, 2 ranks (a gloo traceback on rank 0)",
        "shards_missing_file", "the same line on both ranks", "missing part1/src.npy"),
    api("shards", "a partition into 2 parts run on 3 ranks", "shards_three_ranks",
        "the same line on all 3 ranks", "a partition into 3 part(s)"),
    cli("train-sharded", "a shards folder whose meta.json is garbage (not named)",
        ["train-sharded", "{tmp}/s", "--runs-dir", "{tmp}/runs"], "s/meta.json", "not JSON",
        files={"s/meta.json": "{garbage"}),
    api("shards", "a part's x.npy replaced by another partition's of the same shape (trained on)",
        "shards_swapped_rows", "part0/x.npy", "another content"),
    api("train-sharded", "scored every non-training node, not train's test set", "sharded_test_set",
        "250 test nodes", "the same nodes as train", outcome="handled"),
    api("make_private_sharded (edges)", "sampler='edges' with a two-layer model (its degree "
        "bounding is not sharded)", "sharded_edges_two_hops", "one message-passing layer",
        "2 layers"),
    api("make_private_sharded (edges)", "ShardedEdgeSubgraphs(inference='noisy') (the release "
        "reads the whole graph)", "sharded_edges_noisy", "'none' or 'unprotected' over shards"),
    api("make_private_sharded (edges)", "sampler='edges' on the partition of a directed graph "
        "(its unit is one directed entry)", "sharded_edges_directed", "directed", "occurrence 1",
        outcome="handled"),
    api("partition", "GRAPH --out GRAPH --overwrite (its own source folder: its meta.json would "
        "have been replaced)", "partition_into_source", "its meta.json is not one",
        "source kept"),
    cli("partition", "a file as GRAPH (README.md)", ["partition", "{tmp}/README.md", "--parts", "2", "--out",
                                                   "{tmp}/s"], "'graph'", "README.md (a file)",
        files={"README.md": "# notes"}),
]


def _cli(args: list[str]):
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def api_partition_keeps_user_files(tmp: Path) -> str:
    args = ["partition", "csbm", "--dataset-args", "num_nodes=200", "--out", tmp / "s"]
    assert _cli(args + ["--parts", "3"]).exit_code == 0
    (tmp / "s" / "notes.txt").write_text("mine")
    (tmp / "s" / "mine").mkdir()
    (tmp / "s" / "mine" / "a.txt").write_text("mine")
    done = _cli(args + ["--parts", "2", "--overwrite"])
    assert done.exit_code == 0, done.output
    kept = [f"{f} kept" for f in ("notes.txt", "mine/a.txt") if (tmp / "s" / f).exists()]
    gone = ["old part2 removed"] if not (tmp / "s" / "part2").exists() else []
    return "; ".join(kept + gone)


def api_partition_full_disk(tmp: Path) -> str:
    import errno
    from unittest import mock

    import gnnprivacy.datasets.shard_files as files

    write = files.NpyWriter.write
    calls = {"n": 0}

    def full(self, chunk):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(self, chunk)

    with mock.patch.object(files.NpyWriter, "write", full):
        done = _cli(["partition", "csbm", "--parts", "2", "--out", tmp / "s"])
    lines = [line for line in done.output.splitlines() if line.startswith("Error:")]
    assert done.exit_code == 1 and len(lines) == 1 and "Traceback" not in done.output
    left = [p.name for p in tmp.iterdir()]
    raise ValueError(lines[0] + ("; nothing left in the folder" if not left else f"; left {left}"))


def api_partition_into_source(tmp: Path) -> str:
    from gnnprivacy.datasets.stream import generate_large_graph

    graph = generate_large_graph(tmp / "g", num_nodes=300, num_features=4, seed=0)
    before = {p.name: p.read_bytes() for p in graph.iterdir()}
    done = _cli(["partition", graph, "--parts", "2", "--out", graph, "--overwrite"])
    after = {p.name: p.read_bytes() for p in graph.iterdir()}
    raise ValueError(done.output.strip().splitlines()[-1]
                     + ("; source kept" if after == before else "; source changed"))


def _node_graph(**changes):
    import torch
    from torch_geometric.data import Data

    gen = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(30, 4, generator=gen), y=torch.arange(30) % 3,
                edge_index=torch.randint(0, 30, (2, 80), generator=gen))
    for key, value in changes.items():
        value(data) if callable(value) else setattr(data, key, value)
    return data


def api_partition_nan_x(tmp: Path) -> str:
    import gnnprivacy as gp

    data = _node_graph()
    data.x[3, 1] = float("nan")
    gp.partition(data, tmp / "s", num_parts=2)
    return "partitioned"


def api_partition_float_y(tmp: Path) -> str:
    import gnnprivacy as gp

    data = _node_graph()
    data.y = data.y.float()
    gp.partition(data, tmp / "s", num_parts=2)
    return "partitioned"


def api_partition_far_edge(tmp: Path) -> str:
    import gnnprivacy as gp

    data = _node_graph()
    data.edge_index[0, 5] = 30
    gp.partition(data, tmp / "s", num_parts=2)
    return "partitioned"


def api_partition_num_parts(tmp: Path) -> str:
    import gnnprivacy as gp
    from gnnprivacy.datasets.shards import open_shard

    folder = gp.partition(_node_graph(), tmp / "s", num_parts=2)
    return f"{open_shard(folder, 0).num_parts} parts"


def _ranks_say(tmp: Path, folder: Path, world: int) -> str:
    """Run make_private_sharded on ``world`` forked ranks; the one line every rank raised."""
    import importlib.util

    path = Path(__file__).resolve().parent / "training" / "test_sharded_faults.py"
    spec = importlib.util.spec_from_file_location("_sharded_faults", path)
    faults = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(faults)
    assert faults._fork(faults._open_and_train, world, str(tmp), str(folder)) == [0] * world
    said = faults._outcomes(tmp, world)
    same = len(set(said)) == 1 and "\n" not in said[0]
    suffix = f"; the same line on {'both' if world == 2 else f'all {world}'} ranks" if same else ""
    return said[0] + suffix


def api_shards_mixed(tmp: Path) -> str:
    import shutil

    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.datasets.shards import partition_graph

    data = load_dataset("csbm", num_nodes=400, num_features=12, seed=0)
    folder = partition_graph(data, tmp / "s", num_parts=2, method="metis")
    other = partition_graph(data, tmp / "o", num_parts=2, method="contiguous")
    shutil.rmtree(folder / "part1")
    shutil.copytree(other / "part1", folder / "part1")
    raise ValueError(_ranks_say(tmp, folder, 2))


def api_shards_missing_file(tmp: Path) -> str:
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.datasets.shards import partition_graph

    folder = partition_graph(load_dataset("csbm", num_nodes=400, num_features=12, seed=0),
                             tmp / "s", num_parts=2, method="metis")
    (folder / "part1" / "src.npy").unlink()
    raise ValueError(_ranks_say(tmp, folder, 2))


def api_shards_three_ranks(tmp: Path) -> str:
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.datasets.shards import partition_graph

    folder = partition_graph(load_dataset("csbm", num_nodes=400, num_features=12, seed=0),
                             tmp / "s", num_parts=2, method="metis")
    raise ValueError(_ranks_say(tmp, folder, 3))


def api_shards_swapped_rows(tmp: Path) -> str:
    import numpy as np

    import gnnprivacy as gp
    from gnnprivacy.datasets.shards import open_shard

    folder = gp.partition(_node_graph(), tmp / "s", num_parts=2)
    x = np.load(folder / "part0" / "x.npy")
    np.save(folder / "part0" / "x.npy", x[::-1].copy())
    open_shard(folder, 0)
    return "opened"


def _sharded_edges(tmp: Path, model, directed: bool = False, **options):
    import torch

    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.datasets.shards import partition_graph
    from gnnprivacy.training.sharded import make_private_sharded
    from gnnprivacy.training.sharded_edges import ShardedEdgeSubgraphs

    data = load_dataset("csbm", num_nodes=200, num_features=12, seed=0)
    if directed:
        data.edge_index = data.edge_index[:, data.edge_index[0] < data.edge_index[1]]
    folder = partition_graph(data, tmp / "s", num_parts=1)
    opt = torch.optim.Adam(model.parameters())
    return make_private_sharded(model, opt, str(folder), sampler=ShardedEdgeSubgraphs(
        **options), noise_multiplier=1.0, steps=2, batch_size=20, seed=0)


def _sage_layers(k: int):
    import torch
    from torch_geometric.nn import SAGEConv

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList(SAGEConv(12, 12, aggr="sum") for _ in range(k))

        def forward(self, x, edge_index):
            for conv in self.convs:
                x = conv(x, edge_index)
            return x

    return Net()


def api_sharded_edges_two_hops(tmp: Path) -> str:
    _sharded_edges(tmp, _sage_layers(2))
    return ""


def api_sharded_edges_noisy(tmp: Path) -> str:
    _sharded_edges(tmp, _sage_layers(1), inference="noisy")
    return ""


def api_sharded_edges_directed(tmp: Path) -> str:
    pt = _sharded_edges(tmp, _sage_layers(1), directed=True)
    return f"{pt.privacy['edge_unit']} unit, occurrence {pt.privacy['occurrence_bound']}"


def api_sharded_test_set(tmp: Path) -> str:
    import json
    import os

    from gnnprivacy.datasets import load_dataset

    assert _cli(["partition", "csbm", "--parts", "1", "--out", tmp / "s", "--seed", "2"]).exit_code == 0
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    done = CliRunner(env=env).invoke(main, ["train-sharded", str(tmp / "s"), "--steps", "2",
                                            "--runs-dir", str(tmp / "runs"), "-q", "--seed", "2"])
    assert done.exit_code == 0, done.output
    (path,) = (tmp / "runs").glob("*.json")
    record = json.loads(path.read_text())
    test = int(load_dataset("csbm", seed=2).test_mask.sum())       # what train --seed 2 scores
    same = record["info"]["num_test"] == test and "as gnnprivacy train" in record["info"]["test_nodes"]
    return done.output + ("; the same nodes as train" if same else "")

# -- issue 45: graph tasks, saved models, make_private's conventions (the partition and shards
# rows are the sharded work's) -------------------------------------------------------------------
TG = ["train", "--task", "graph", "--method", "graph", "--dataset", "cox2", "--epochs", "1",
      "--hidden", "8", "-q", "--runs-dir", "{tmp}/runs", "--data-root", "{tmp}/data"]
OWN_MODULE = ("import torch\nfrom torch_geometric.nn import GCNConv\n\n\n"
              "class Net(torch.nn.Module):\n    def __init__(self, in_channels, classes):\n"
              "        super().__init__()\n        self.conv = GCNConv(in_channels, classes)\n\n"
              "    def forward(self, x, edge_index):\n        return self.conv(x, edge_index)\n")
CASES += [
    # 1. files destroyed
    api("saved models", "gp.save_model(m, '<run>.model.pt') over a run's model (was replaced "
        "silently)", "save_model_over_run_model", "existing saved model", "force=True"),
    # 2. options silently ignored on graph tasks
    cli("graph task", "--split public (was ignored, and recorded as used)", TG + ["--split", "public"],
        "split", "unset with --task graph", setup="cox2_root"),
    api("graph task", "--train-frac 0.3 --test-frac 0.5 (was ignored, and recorded as used)",
        "graph_fractions", "fractions 0.3 / 0.2 / 0.5", "141 / 93 / 233 graphs", outcome="handled"),
    cli("graph task", "--dataset-args foo=1 (was ignored, and recorded as used)",
        TG + ["--dataset-args", "foo=1"], "dataset_args", "unset with --task graph", setup="cox2_root"),
    api("graph task", "a sweep with base: {task: graph, train_frac: 0.2} (was ignored, and recorded "
        "as used)", "sweep_graph_train_frac", "train fraction 0.2: 93 of 467 graphs", outcome="handled"),
    # 3. bad graph data
    api("graph data (make_private graphs)", "NaN features in one graph", "graphs_nan_one",
        "graph 5: x", "1 NaN"),
    api("graph data (make_private graphs)", "NaN features in every graph (every parameter NaN, an "
        "epsilon reported)", "graphs_nan_all", "graph 0: x", "finite node features"),
    api("graph data (make_private graphs)", "a graph whose feature width differs (a torch.cat "
        "traceback)", "graphs_width", "graph 3: x", "4 features per node, as graph 0"),
    api("graph data (make_private graphs)", "a 0-d y (an IndexError)", "graphs_0d_y", "graph 2: y",
        "one label row per graph"),
    api("graph data (make_private graphs)", "a float edge_index", "graphs_float_edges",
        "graph 4: edge_index", "integer"),
    cli("graph task", "one class only (accuracy 1.0)", TG, "at least 2 classes",
        setup="cox2_one_class"),
    cli("graph task", "a truncated COX2_A.txt (13 graphs read, 0 test graphs, 'test accuracy nan')",
        TG, "COX2_A.txt is damaged", "restore the original TU files", setup="cox2_truncated"),
    # 5. misleading errors
    api("make_private (graphs)", "input graphs with a self-loop on every node, GCN + mean-pool (was "
        "refused: 'the loop mixes subgraphs')", "self_loops_gcn", "3 steps", outcome="handled"),
    api("make_private", "make_private twice on one model (was: 'the batch is not from pt.loader')",
        "mp_twice", "no open make_private uses", ".close()"),
    api("make_private", "a full-graph forward with gradients between the draw and the step (was: "
        "'the batch did not reach the model')", "mp_full_forward", "other data than the batch",
        "after optimizer.step()"),
    api("train", "gp.train('cox2', method='gcn') (was: 'cox2 is not a dataset')", "cox2_gcn",
        "graph-classification method for 'cox2'", "dpsgd-graph"),
    api("saved models", "gp.load_model(path, imports='m') (iterated the string's characters)",
        "load_model_imports_str", "imports", "m (ModuleNotFoundError"),
    # 6. one saved-model story
    api("saved models", "a gp.save_model file read by gp.load (was refused: 'format "
        "gnnprivacy-model/1')", "load_user_model", "SavedModel", "predict rows 150", outcome="handled"),
    api("saved models", "gp.load_model(path).predict(data) (had no predict)", "load_model_predict",
        "predict rows 150", outcome="handled"),
    cli("saved models", "gnnprivacy predict on the .model.pt of train --task graph (was refused)",
        ["predict", "{tmp}/g.model.pt", "--data-root", "{tmp}/data"], "graph,prediction,logit_0",
        setup="graph_model", outcome="handled"),
    api("saved models", "gp.train('cox2', method='dpsgd-graph', task='graph').predict() "
        "(AttributeError)", "graph_run_predict", "rows 467", outcome="handled"),
    # 7. conventions
    cli("assess", "assess own.pt --import mymodels45, run beside mymodels45.py (needed "
        "PYTHONPATH=.)", ["assess", "own.pt", "--import", "mymodels45", "--no-link-stealing", "-q"],
        "In plain words", setup="own_model_module", outcome="handled"),
    api("make_private", "make_private(..., num_workers=2) (a TypeError)", "mp_num_workers",
        "num_workers", "not a torch DataLoader"),
    api("make_private", "reduction='sum' with the default loss_reduction='mean' (passed silently)",
        "mp_sum_loss", "reduced with 'sum'", "loss_reduction='sum'"),
    api("make_private", "clip_grad_norm_ before optimizer.step() (passed silently)", "mp_clip",
        "clip_grad_norm_", "max_grad_norm"),
    # fresh probes of the same surfaces
    api("make_private (graphs)", "GATConv(edge_dim) on graphs with a self-loop on every node (its "
        "edge features were clipped in the wrong graphs)", "gat_self_loops",
        "equal to the naive loop", outcome="handled"),
    api("make_private (graphs)", "graphs whose x requires grad (was: 'a tensor outside the model "
        "receives a gradient')", "graphs_x_requires_grad", "2 steps", outcome="handled"),
    api("make_private (graphs)", "a dict of graphs by name (a KeyError)", "graphs_dict",
        "a PyG Dataset or a list of Data graphs"),
    cli("assess", "a saved model whose forward takes no edge_index (a TypeError traceback)",
        ["assess", "{tmp}/lin.pt", "--no-link-stealing", "-q"], "model(data.x, data.edge_index)",
        setup="linear_model"),
    api("saved models", "a hand-edited built-in model file without 'fitted' (a KeyError "
        "traceback)", "builtin_model_without_fitted", "a complete gnnprivacy-model/1 file"),
    api("saved models", "a graph model's predict on graphs of another width (a matmul error)",
        "graph_predict_width", "38 features per node", "5 features"),
    api("graph task", "gp.train(a Data, method='dpsgd-graph') (an AttributeError)",
        "graph_method_on_user_data", "a graph dataset's name", "sampler='graphs'"),
]


def _cox2() -> Path:
    root = shared_datasets().parent / "datasets"
    if not (root / "COX2" / "raw").is_dir():
        pytest.skip("needs the shared datasets (COX2)")
    return root / "COX2"


def setup_cox2_root(tmp: Path) -> None:
    (tmp / "data").mkdir()
    (tmp / "data" / "COX2").symlink_to(_cox2())


def _cox2_copy(tmp: Path) -> Path:
    import shutil

    shutil.copytree(_cox2(), tmp / "data" / "COX2")
    return tmp / "data" / "COX2" / "raw"


def setup_cox2_one_class(tmp: Path) -> None:
    labels = _cox2_copy(tmp) / "COX2_graph_labels.txt"
    labels.write_text("".join("1\n" for _ in labels.read_text().split()))


def setup_cox2_truncated(tmp: Path) -> None:
    edges = _cox2_copy(tmp) / "COX2_A.txt"
    edges.write_bytes(edges.read_bytes()[: edges.stat().st_size // 50])


def setup_graph_model(tmp: Path) -> None:
    setup_cox2_root(tmp)
    result = _train_user_graph(tmp)
    result.save(str(tmp / "g.model.pt"))


def _train_user_graph(tmp: Path, method: str = "graph"):
    import gnnprivacy as gp

    if not (tmp / "data").exists():
        setup_cox2_root(tmp)
    return gp.train("cox2", method=method, task="graph", epochs=1, hidden=8,
                    data_root=str(tmp / "data"))


def setup_own_model_module(tmp: Path) -> None:
    import importlib
    import sys

    import gnnprivacy as gp

    (tmp / "mymodels45.py").write_text(OWN_MODULE)
    sys.path.insert(0, str(tmp))
    try:
        module = importlib.import_module("mymodels45")
        gp.save_model(module.Net(32, 4), tmp / "own.pt", init={"in_channels": 32, "classes": 4},
                      dataset={"name": "csbm", "num_nodes": 150})
    finally:
        sys.path.remove(str(tmp))
        sys.modules.pop("mymodels45", None)


def setup_linear_model(tmp: Path) -> None:
    import torch

    import gnnprivacy as gp

    gp.save_model(torch.nn.Linear(32, 2), tmp / "lin.pt", init={"in_features": 32, "out_features": 2},
                  dataset={"name": "csbm", "num_nodes": 150})


def api_save_model_over_run_model(tmp: Path) -> str:
    import gnnprivacy as gp

    setup_cox2_root(tmp)
    result = _train_user_graph(tmp)
    path = result.save(str(tmp / "run.model.pt"))
    before = path.read_bytes()
    try:
        gp.save_model(result.model, path, init=result.model.init_args)
    finally:
        assert path.read_bytes() == before
    return ""


def api_graph_fractions(tmp: Path) -> str:
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    setup_cox2_root(tmp)
    args = [a.replace("{tmp}", str(tmp)) for a in TG]
    out = CliRunner().invoke(main, args + ["--train-frac", "0.3", "--test-frac", "0.5"])
    assert out.exit_code == 0, out.output
    split = json.loads(next((tmp / "runs").glob("*.json")).read_text())["split"]
    f, n = split["fractions"], split["sizes"]
    return (f"fractions {f['train']:g} / {f['val']:g} / {f['test']:g}: {n['train']} / "
            f"{n['val']} / {n['test']} graphs")


def api_sweep_graph_train_frac(tmp: Path) -> str:
    from gnnprivacy.experiments.sweep import load_sweep, run_sweep

    setup_cox2_root(tmp)
    (tmp / "s.yaml").write_text("name: g\nbase: {task: graph, dataset: cox2, method: graph, "
                                f"train_frac: 0.2, epochs: 1, hidden: 8, data_root: {tmp / 'data'}}}\n"
                                "grid: {lr: [0.01]}\n")
    run_sweep(load_sweep(tmp / "s.yaml"), runs_dir=tmp / "runs", workers=1)
    record = json.loads(next((tmp / "runs").glob("*.json")).read_text())
    sizes = record["split"]["sizes"]
    return (f"train fraction {record['split']['fractions']['train']:g}: {sizes['train']} of "
            f"{record['split']['num_nodes']} graphs")


def _mp_graphs(mutate=None, *, width=4, model=None, steps=2, loss=None, after_backward=None):
    """make_private(sampler='graphs') on 12 small ring graphs (``mutate``-d), then its loop."""
    import torch
    from torch.nn import functional as F
    from torch_geometric.data import Data

    import gnnprivacy as gp
    from gnnprivacy.training.graph_classification import GraphClassifier

    gen = torch.Generator().manual_seed(0)
    graphs = []
    for i in range(12):
        k = 3 + i % 4
        ring = torch.arange(k)
        ei = torch.stack([torch.cat([ring, (ring + 1) % k]), torch.cat([(ring + 1) % k, ring])])
        graphs.append(Data(x=torch.randn(k, width, generator=gen), edge_index=ei,
                           y=torch.tensor([i % 2])))
    if mutate is not None:
        graphs = mutate(graphs)
    torch.manual_seed(0)
    model = model if model is not None else GraphClassifier(width, 2, hidden=4, layers=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, graphs, sampler="graphs", noise_multiplier=1.0, steps=steps,
                         seed=0)
    try:
        for b in pt.loader:
            opt.zero_grad()
            out = model(b.x, b.edge_index, b.batch)
            (loss or F.cross_entropy)(out, b.y).backward()
            if after_backward is not None:
                after_backward(model)
            opt.step()
    finally:
        pt.close()
    return f"{pt.steps} steps"


def _nan_x(graphs, which):
    for i in which:
        graphs[i].x = graphs[i].x.clone()
        graphs[i].x[0, 1] = float("nan")
    return graphs


def api_graphs_nan_one(tmp: Path) -> str:
    return _mp_graphs(lambda gs: _nan_x(gs, [5]))


def api_graphs_nan_all(tmp: Path) -> str:
    return _mp_graphs(lambda gs: _nan_x(gs, range(len(gs))))


def api_graphs_width(tmp: Path) -> str:
    import torch

    def widen(gs):
        gs[3].x = torch.randn(gs[3].num_nodes, 6)
        return gs
    return _mp_graphs(widen)


def api_graphs_0d_y(tmp: Path) -> str:
    import torch

    def scalar(gs):
        gs[2].y = torch.tensor(1)
        return gs
    return _mp_graphs(scalar)


def api_graphs_float_edges(tmp: Path) -> str:
    def floated(gs):
        gs[4].edge_index = gs[4].edge_index.float()
        return gs
    return _mp_graphs(floated)


def api_self_loops_gcn(tmp: Path) -> str:
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch_geometric.nn import GCNConv, global_mean_pool
    from torch_geometric.utils import add_self_loops

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2, self.head = GCNConv(4, 8), GCNConv(8, 8), nn.Linear(8, 2)

        def forward(self, x, edge_index, batch):
            h = F.relu(self.c2(F.relu(self.c1(x, edge_index)), edge_index))
            return self.head(global_mean_pool(h, batch))

    def loops(gs):
        for g in gs:
            g.edge_index = add_self_loops(g.edge_index, num_nodes=g.num_nodes)[0]
        return gs
    torch.manual_seed(0)
    return _mp_graphs(loops, model=Net(), steps=3)


def _mp_nodes():
    import torch
    from torch_geometric.nn import GCNConv

    import gnnprivacy as gp

    data = gp.load_dataset("csbm", num_nodes=200)
    torch.manual_seed(0)
    model = GCNConv(data.num_features, int(data.y.max()) + 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return data, model, opt, gp.make_private(model, opt, data, sampler="nodes",
                                             noise_multiplier=1.0, steps=2, seed=0)


def _node_loop(data, model, opt, pt, *, loss=None, between=None):
    from torch.nn import functional as F

    try:
        for b in pt.loader:
            opt.zero_grad()
            out = model(b.x, b.edge_index)[b.center]
            (loss or F.cross_entropy)(out, b.y[b.center]).backward()
            if between is not None:
                between(model)
            opt.step()
    finally:
        pt.close()
    return ""


def api_mp_twice(tmp: Path) -> str:
    import torch

    import gnnprivacy as gp

    data, model, opt, pt = _mp_nodes()
    try:
        gp.make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), data, sampler="nodes",
                        noise_multiplier=1.0, steps=2)
    finally:
        pt.close()
    return ""


def api_mp_full_forward(tmp: Path) -> str:
    data, model, opt, pt = _mp_nodes()
    return _node_loop(data, model, opt, pt,
                      between=lambda m: m(data.x.clone(), data.edge_index.clone()))


def api_cox2_gcn(tmp: Path) -> str:
    import gnnprivacy as gp

    gp.train("cox2", method="gcn")
    return ""


def api_load_model_imports_str(tmp: Path) -> str:
    import torch

    import gnnprivacy as gp

    path = gp.save_model(torch.nn.Linear(2, 2), tmp / "lin.pt", init={"in_features": 2,
                                                                      "out_features": 2})
    gp.load_model(path, imports="m")
    return ""


def _saved_gcn(tmp: Path):
    from torch_geometric.nn import GCNConv

    import gnnprivacy as gp

    data = gp.load_dataset("csbm", num_nodes=150)
    path = gp.save_model(GCNConv(data.num_features, 4), tmp / "gcn.pt",
                         init={"in_channels": data.num_features, "out_channels": 4})
    return data, path


def api_load_user_model(tmp: Path) -> str:
    import gnnprivacy as gp

    data, path = _saved_gcn(tmp)
    loaded = gp.load(str(path))
    return f"{type(loaded).__name__} predict rows {loaded.predict(data).shape[0]}"


def api_load_model_predict(tmp: Path) -> str:
    import gnnprivacy as gp

    data, path = _saved_gcn(tmp)
    return f"predict rows {gp.load_model(path).predict(data).shape[0]}"


def api_graph_run_predict(tmp: Path) -> str:
    return f"rows {_train_user_graph(tmp, 'dpsgd-graph').predict().shape[0]}"


def api_mp_num_workers(tmp: Path) -> str:
    import torch
    from torch_geometric.nn import GCNConv

    import gnnprivacy as gp

    data = gp.load_dataset("csbm", num_nodes=200)
    model = GCNConv(data.num_features, 4)
    gp.make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), data, sampler="nodes",
                    epsilon=1.0, num_workers=2)
    return ""


def api_mp_sum_loss(tmp: Path) -> str:
    from torch.nn import functional as F

    return _node_loop(*_mp_nodes(), loss=lambda out, y: F.cross_entropy(out, y, reduction="sum"))


def api_mp_clip(tmp: Path) -> str:
    import torch

    return _node_loop(*_mp_nodes(),
                      between=lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0))


def api_gat_self_loops(tmp: Path) -> str:
    from tests.training.private.test_self_loops import _gat_matches_naive, _graphs, _looped

    same = _gat_matches_naive(_looped(_graphs(edge_attr=True), every=True))
    return "equal to the naive loop" if same else "NOT equal to the naive loop"


def api_graphs_x_requires_grad(tmp: Path) -> str:
    def grad(gs):
        gs[1].x = gs[1].x.clone().requires_grad_(True)
        return gs
    return _mp_graphs(grad)


def api_graphs_dict(tmp: Path) -> str:
    return _mp_graphs(lambda gs: {f"g{i}": g for i, g in enumerate(gs)})


def api_builtin_model_without_fitted(tmp: Path) -> str:
    import torch

    import gnnprivacy as gp

    torch.save({"format": "gnnprivacy-model/1", "record": "{}", "method": "gcn"},
               tmp / "x.model.pt")
    gp.load(str(tmp / "x.model.pt"))
    return ""


def api_graph_method_on_user_data(tmp: Path) -> str:
    import gnnprivacy as gp

    gp.train(gp.load_dataset("csbm", num_nodes=120), method="dpsgd-graph")
    return ""


def api_graph_predict_width(tmp: Path) -> str:
    import torch
    from torch_geometric.data import Data

    result = _train_user_graph(tmp)
    result.predict([Data(x=torch.randn(3, 5), edge_index=torch.zeros(2, 0, dtype=torch.long))])
    return ""


def run_case(case: Case, tmp: Path) -> tuple[bool, str]:
    """Run ``case`` in the scratch folder ``tmp``; returns ``(failed, message)``.

    ``failed`` is True for a non-zero exit code / an exception of the expected kind.
    """
    for name, text in case.files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
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
    import warnings

    if case.kind == "api":
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                text = globals()[f"api_{case.args[0]}"](tmp)
            except ValueError as exc:
                return True, str(exc)
        return False, text + "".join(f"\nwarning: {w.message}" for w in caught)
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    args = [a.replace("{tmp}", str(tmp)) for a in case.args]
    with warnings.catch_warnings(record=True) as caught:  # under pytest, warnings do not reach stderr
        warnings.simplefilter("always")
        out = CliRunner().invoke(main, args, catch_exceptions=True)
    text = out.output + (out.stderr if out.stderr_bytes is not None else "")
    text += "".join(f"\nwarning: {w.message}" for w in caught)
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


FAULTS_TESTS = Path(__file__).resolve().parent / "experiments" / "test_faults.py"

#: (where, fault, what happens, the test in tests/experiments/test_faults.py)
FAULTS: list[tuple[str, str, str, str]] = [
    ("train", "a full disk or a read-only folder at each write (checkpoint description, checkpoints, "
     "split, record; a patched writer fails the k-th write with ENOSPC or EROFS)",
     "a checkpoint that cannot be written warns and training goes on; any other write: exit 1 with one "
     "line naming the file and the reason, nothing published, the finished run's record printed on "
     "stdout; earlier runs unchanged; the rerun publishes", "test_train_write_fault_at_each_write"),
    ("train", "a full disk on a real 64 KiB tmpfs, from full to enough room", "published complete, or "
     "exit 1 with `No space left on device`; never a half-written run", "test_train_on_a_full_tmpfs"),
    ("train", "the record cannot be written after training (disk full)", "the checkpoint is kept and "
     "named: `--resume` publishes the run without training a step again",
     "test_a_run_whose_record_cannot_be_written_keeps_its_checkpoint_for_resume"),
    ("train", "a split that a full disk truncated after its record was written; a split changed or "
     "deleted", "the record names its split with sha256 and size: results, report and sweeps skip it by "
     "name as unfinished (a sweep reruns it)", "test_a_record_with_a_damaged_companion_is_not_finished"),
    ("train", "two identical heterpoisson trains in one runs dir (one checkpoint path)", "each write "
     "uses its own temporary file: both finish (the old fixed `.pt.tmp` name lost a rename)",
     "test_concurrent_writes_of_one_path_both_succeed"),
    ("train, sweep, tune, demo -o, results -o, report -o", "a read-only folder (a read-only bind mount)",
     "one-line error naming the option and `Read-only file system`, before any training",
     "test_read_only_folders_are_refused_before_any_work"),
    ("sweep", "a full disk or a read-only folder at each write (splits, records, failure records, the "
     "index cache)", "the run is listed as failed with the one-line reason; nothing half-written is "
     "listed as finished; the rerun finishes every run; earlier records unchanged",
     "test_sweep_write_fault_at_each_write"),
    ("sweep", "a full disk when a worker claims a run", "the run fails with `could not write the claim`, "
     "no claim file is left, the rerun runs it", "test_a_claim_on_a_full_disk_fails_the_run_and_leaves_no_claim"),
    ("tune", "a full disk or a read-only folder at each write (trial checkpoints, splits and records, the "
     "tune record)", "exit 1 with one line; no tune record; the name is free again; the rerun removes the "
     "unfinished trials with a message and finishes", "test_tune_write_fault_at_each_write"),
    ("datasets", "a full disk while building the processed PyG cache", "one line naming the cache folder "
     "and `No space left on device`, not a parse error about intact raw files",
     "test_dataset_cache_on_a_full_disk"),
    ("datasets", "the same on a real 2 MiB tmpfs", "the same", "test_dataset_cache_on_a_full_tmpfs"),
    ("train", "SIGINT, then SIGTERM, mid-training; then `--resume`", "exit 130 / 143 with one line; "
     "nothing published; the checkpoint is kept and the rerun continues from it",
     "test_signals_to_train_then_resume"),
    ("tune", "SIGINT, then SIGTERM, mid-trial; then a rerun", "exit 130 / 143; no tune record; its claim "
     "released; the rerun removes the unfinished trials and finishes", "test_signals_to_tune_then_rerun"),
    ("sweep", "SIGINT (Ctrl-C) to the sweep's process group", "no new run starts (the pool holds only "
     "running runs); the running ones finish and publish; exit 130; no process left; the rerun does the "
     "rest", "test_sigint_to_a_sweep_starts_no_new_run"),
    ("sweep", "SIGTERM to the sweep's process", "the workers are stopped at once; exit 143; no process "
     "left; the rerun retakes the dead claims and finishes every run once",
     "test_sigterm_to_a_sweep_orphans_nothing"),
    ("sweep", "a sweep with `resume: true` killed (SIGKILL) and rerun", "the run continues from "
     "`RUNS/checkpoints` (the record says `resumed_from_step`), not from step 0",
     "test_killed_resumable_sweep_continues_from_its_checkpoint"),
    ("sweep", "OMP_NUM_THREADS=1 in the sweep's environment", "workers keep 1 thread (not cpu_count / "
     "workers)", "test_workers_keep_the_parents_omp_num_threads"),
    ("sweep", "Ctrl-C while runs are queued", "the pool is handed at most `workers` runs, so none waits in "
     "its queue to start after the Ctrl-C", "test_local_executor_hands_the_pool_only_running_items"),
]


CODE_TESTS = Path(__file__).resolve().parent / "test_files_run_no_code.py"
#: (file the library reads, the payload planted, what happens, the test in
#: tests/test_files_run_no_code.py): a pickle payload never runs (issue 35 class 2)
CODE_FILES: list[tuple[str, str, str, str]] = [
    ("`train --resume` checkpoint", "a pickle whose `__reduce__` calls `os.system`",
     "one line naming the object it would call (`posix.system`), not blamed on the fingerprint; "
     "read with `torch.load(weights_only=True)`", "test_train_resume_refuses_a_checkpoint_with_a_payload"),
    ("a trainer's `resume=True` checkpoint", "the same", "the same",
     "test_trainer_resume_refuses_a_checkpoint_with_a_payload"),
    ("`make_private` state (`pt.state_dict()`)", "none: it holds tensors and plain values",
     "round-trips through `torch.load(weights_only=True)`", "test_make_private_state_round_trips_weights_only"),
    ("a saved model (`gp.load`, `predict`)", "a payload in torch's zip format", "refused with one line",
     "test_a_saved_model_with_a_payload_is_refused"),
    ("a saved model", "a bare pickle posing as `.model.pt`", "refused with one line naming the object",
     "test_a_plain_pickle_posing_as_a_model_is_refused"),
    ("run records, the index cache, splits", "a payload in each", "JSON / npz without pickles: "
     "refused or skipped by name", "test_records_index_and_split_files_with_a_payload"),
    ("the accounting cache", "an `.npz` holding a pickled object", "ignored with a warning and "
     "recomputed", "test_accounting_cache_entries_with_a_payload_are_ignored"),
    ("`gnnprivacy datasets` (Planetoid `ind.*`)", "a payload in `ind.cora.graph`", "the listing parses "
     "the pickle opcodes without unpickling and reports the file", "test_dataset_listing_never_unpickles_planetoid_files"),
    ("loading Planetoid `ind.*`", "the same", "refused before PyG's loader unpickles the file",
     "test_loading_refuses_a_planetoid_file_with_a_payload"),
    ("PyG's processed cache (`data.pt`, `pre_transform.pt`)", "a payload planted in the cache",
     "refused and rebuilt from the raw files with a warning", "test_processed_cache_with_a_payload_is_rebuilt_not_run"),
    ("a YAML config (`-c`)", "a `!!python/object/apply` tag", "refused (safe loader)",
     "test_a_yaml_config_with_a_python_tag_is_refused"),
    ("a checkpoint torn by a crash", "none: a truncated file", "one line, not a traceback",
     "test_checkpoint_message_is_one_line_for_a_torn_file"),
]


def test_every_file_that_could_run_code_names_a_test_that_exists():
    import ast

    tree = ast.parse(CODE_TESTS.read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    named = [f[3] for f in CODE_FILES]
    assert len(named) == len(set(named)) and set(named) <= defined, set(named) - defined
    missing = defined - set(named) - {"test_the_payload_runs_when_unpickled"}   # the positive control
    assert not missing, f"tests in test_files_run_no_code.py without a row: {missing}"


def test_every_fault_names_a_test_that_exists():
    import ast

    tree = ast.parse(FAULTS_TESTS.read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    named = [f[3] for f in FAULTS]
    assert len(named) == len(set(named)) and set(named) <= defined, set(named) - defined
    assert defined <= set(named), f"tests in test_faults.py without a row: {defined - set(named)}"


def test_the_table_has_at_least_60_rows_and_unique_ids():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


def render_table() -> str:
    """``docs/bad-inputs.md``, generated from :data:`CASES` and :data:`FAULTS`."""
    errors = sum(c.outcome == "error" for c in CASES)
    handled = sum(c.outcome == "ok" for c in CASES)
    warned = sum(c.outcome == "warning" for c in CASES)
    lines = [
        "# Bad inputs and what happens",
        "",
        "Every bad input we tried against gnnprivacy, and its outcome. Each row is a test in",
        "`tests/test_bad_inputs.py` (this page is generated from that list:",
        "`python tests/test_bad_inputs.py --write`; a test fails when it is out of date).",
        "",
        f"**{len(CASES)} bad inputs: {errors} clear errors, {warned} warnings that skip the bad "
        f"part and keep the rest, {handled} extreme inputs computed correctly, "
        f"{len(CASES) - errors - warned - handled} unusual but legal inputs handled correctly, "
        "0 silent wrong results, 0 tracebacks.** Faults of the machine (a full disk, a read-only folder, "
        f"signals) are in the [second table](#faults) ({len(FAULTS)} rows).",
        "",
        "- *error*: the command exits non-zero (the Python call raises a `ValueError` subclass, usually "
        "`gnnprivacy.errors.InvalidParameterError`) with a one-line message naming the parameter, what was "
        "expected and what was received; the message contains the fragments shown.",
        "- *warning*: the command succeeds on the valid input and prints a warning naming what it skipped.",
        "- *ok*: an extreme but legal input that once failed; the command now computes it (the output "
        "contains the fragments shown).",
        "- *handled*: the input is unusual but legal and the command does the right thing with it (its "
        "output shows the fragments).",
        "",
        "| # | where | bad input | outcome | the message contains |",
        "|---|---|---|---|---|",
    ]
    for i, c in enumerate(CASES, 1):
        frags = ", ".join(f"`{f}`" for f in c.expect).replace("|", "\\|")
        lines.append(f"| {i} | {c.area} | {c.text.replace('|', chr(92) + '|')} | {c.outcome} | {frags} |")
    lines += [
        "",
        "## Faults",
        "",
        "Faults of the machine rather than of the input, each with its test in "
        "`tests/experiments/test_faults.py`. The mechanism behind every row: each file is written by one "
        "atomic writer (temporary file, fsync, rename; a failure names the file and the reason in one line), "
        "a run publishes its split and then its record, which names the split with sha256 and size, readers "
        "count a record without complete companions as unfinished, output folders are checked before any "
        "training, and SIGTERM is handled like Ctrl-C (workers stopped, nothing unfinished published). After "
        "every fault and its rerun: no finished run is lost or changed, nothing half-written is listed as "
        "finished, and no process is left running.",
        "",
        "| # | where | fault | what happens | test |",
        "|---|---|---|---|---|",
    ]
    for i, (where, fault, outcome, test) in enumerate(FAULTS, 1):
        lines.append(f"| {i} | {where} | {fault} | {outcome} | `{test}` |")
    lines += [
        "",
        "## Files that run code",
        "",
        "Every file the library reads, with a pickle payload planted in it (an object whose "
        "`__reduce__` would create a marker file): the marker is never created. Each row is a test in "
        "`tests/test_files_run_no_code.py`, whose first test is the positive control (the same payload "
        "does run under a plain `pickle.load`). PyG's own Planetoid loader unpickles `ind.*` files: the "
        "library parses their opcodes first, and [the install page](install.md) says to trust your data root.",
        "",
        "| # | file | planted | what happens | test |",
        "|---|---|---|---|---|",
    ]
    for i, (where, payload, outcome, test) in enumerate(CODE_FILES, 1):
        lines.append(f"| {i} | {where} | {payload} | {outcome} | `{test}` |")
    return "\n".join(lines) + "\n"


def test_table_is_up_to_date():
    assert DOC.is_file() and DOC.read_text(encoding="utf-8") == render_table(), \
        "docs/bad-inputs.md is stale: run python tests/test_bad_inputs.py --write"


if __name__ == "__main__":
    if "--write" in sys.argv:
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(render_table(), encoding="utf-8")
        print(f"wrote {DOC} ({len(CASES)} rows)")
