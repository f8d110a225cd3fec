"""Random configurations and randomly damaged records: no command prints a traceback (issue 24).

Hypothesis draws (1) configuration files with random values for random options (40 per run of
the suite; 300 ran clean when the test was written), which ``train``
resolves and runs on a tiny graph, and (2) runs directories holding one good record beside a
randomly damaged one (truncated, a field replaced by a value of another type, a key removed,
random bytes, a damaged companion, index cache or failure record; 25 per run, 250 ran clean),
which ``results`` and ``report`` read. Every command must end with exit status 0 or a one-line error, never a
traceback; a damaged record is either valid or skipped by name.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnnprivacy.cli import main

SMALL = "num_nodes=60,num_features=4,num_classes=2,avg_degree=3"
METHODS = ("gcn", "mlp", "sage", "dpmlp", "heterpoisson", "dpgnn", "rgnn", "featurerr", "edgerr", "gap",
           "edge-dp", "gap-edge", "link-edge-dp")
#: the common run options (drawn most often: every method reads them) and some methods' own
RUN_OPTIONS = ("method", "dataset", "dataset_args", "split", "train_frac", "val_frac", "test_frac", "seed",
               "split_seed", "device", "resume", "data_root")
METHOD_OPTIONS = ("epsilon", "delta", "lr", "dropout", "hidden", "layers", "batch_size", "steps", "eps_e",
                  "eps_f", "mcmc_steps", "preset", "q_b", "clip", "max_degree", "weight_decay", "bogus")
options = st.one_of(st.sampled_from(RUN_OPTIONS), st.sampled_from(METHOD_OPTIONS))
#: drawn values above these are lowered (the test is about tracebacks, not about long runs)
LIMITS = {"epochs": 2, "steps": 3, "mcmc_steps": 1000, "layers": 4, "hidden": 64, "batch_size": 4096}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10**6), st.sampled_from([0, 1, 2, -1, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 0.5, 1.0, 1e-9, -0.1, 2.0]),
    st.text(max_size=12), st.sampled_from(["gcn", "cora", "csbm", "public", "random", "auto", "a=1", ""]))
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=5), scalars, max_size=2))


def _invoke(args) -> tuple[int, str]:
    out = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)
    text = out.output
    if out.exception is not None and not isinstance(out.exception, SystemExit):
        import traceback

        text += "".join(traceback.format_exception(out.exception))
    return out.exit_code, text


def _assert_clean(code: int, text: str) -> None:
    assert "Traceback" not in text, text
    if code != 0:
        errors = [line for line in text.splitlines() if line.startswith("Error:")]
        assert errors, text


@pytest.mark.filterwarnings("ignore::UserWarning")  # the drawn values are meant to warn
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(method=st.sampled_from(METHODS), extra=st.dictionaries(options, values, min_size=1, max_size=3))
def test_random_configurations_print_no_traceback(method, extra):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-config-"))
    try:
        config = {"method": method, "dataset": "csbm", "dataset_args": SMALL, "epochs": 1, **extra,
                  "runs_dir": str(folder / "runs")}
        for key, most in LIMITS.items():  # keep every run short and small, whatever was drawn
            value = config.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > most:
                config[key] = most
        try:
            text = yaml.safe_dump(config, allow_unicode=True)
        except yaml.YAMLError:
            return
        (folder / "c.yaml").write_text(text, encoding="utf-8")
        _assert_clean(*_invoke(["train", "-c", folder / "c.yaml", "-q"]))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _good_record(runs: Path, run_id: str, seed: int = 0):
    from gnnprivacy.datasets.splits import random_split
    from gnnprivacy.records.store import ResultStore
    from gnnprivacy.records.record import RunRecord

    record = RunRecord(run_id=run_id, method="dpmlp", dataset="csbm",
                       config={"method": "dpmlp", "dataset": "csbm", "seed": seed, "epsilon": 4.0},
                       seeds={"run": seed, "split": seed}, epsilon=3.9, delta=1e-4,
                       privacy={"private": True, "unit": "node", "relation": "add_or_remove"},
                       metrics={"test_accuracy": 0.6, "val_accuracy": 0.5}, timings={"total_seconds": 1.0},
                       info={"steps": 3}, versions={}, git_commit=None)
    ResultStore(runs).publish(record, {f"{run_id}.split.npz": random_split(30, seed=seed, dataset="csbm").save})


KEYS = ("run_id", "method", "dataset", "config", "seeds", "epsilon", "delta", "privacy", "metrics",
        "timings", "split", "info", "files", "created", "versions")
damage = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0.0, 1.0)),
    st.tuples(st.just("replace"), st.sampled_from(KEYS), values),
    st.tuples(st.just("metric"), st.sampled_from(["test_accuracy", "val_accuracy", "x"]), values),
    st.tuples(st.just("remove"), st.sampled_from(KEYS)),
    st.tuples(st.just("bytes"), st.binary(max_size=64)),
    st.tuples(st.just("companion"), st.floats(0.0, 1.0)),
    st.tuples(st.just("failure"), st.binary(max_size=40)),
    st.tuples(st.just("index"), st.binary(max_size=40)),
)


def _apply(runs: Path, kind) -> None:
    path = runs / "bad.json"
    text = path.read_text()
    data = json.loads(text)
    if kind[0] == "truncate":
        path.write_text(text[: int(len(text) * kind[1])])
    elif kind[0] == "replace":
        data[kind[1]] = kind[2]
        path.write_text(json.dumps(data, allow_nan=True))
    elif kind[0] == "metric":
        data["metrics"][kind[1]] = kind[2]
        path.write_text(json.dumps(data, allow_nan=True))
    elif kind[0] == "remove":
        data.pop(kind[1], None)
        path.write_text(json.dumps(data))
    elif kind[0] == "bytes":
        path.write_bytes(kind[1])
    elif kind[0] == "companion":
        split = runs / "bad.split.npz"
        split.write_bytes(split.read_bytes()[: int(split.stat().st_size * kind[1])])
    elif kind[0] == "failure":
        (runs / "other.failed.json").write_bytes(kind[1])
    else:
        (runs / ".index.json").write_bytes(kind[1])


@pytest.mark.filterwarnings("ignore::UserWarning")  # skipped records are meant to warn
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(kind=damage, fmt=st.sampled_from(["table", "csv", "json"]))
def test_randomly_damaged_records_print_no_traceback(kind, fmt):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-records-"))
    try:
        runs = folder / "runs"
        _good_record(runs, "good")
        _good_record(runs, "bad", seed=1)
        from gnnprivacy.records.store import ResultStore

        ResultStore(runs).rows()  # an index cache to damage or to serve stale rows
        _apply(runs, kind)
        code, text = _invoke(["results", runs, "--format", fmt])
        _assert_clean(code, text)
        assert code == 0 and "good" in text, text  # the good run is always listed
        code, text = _invoke(["report", runs, "-o", folder / "report"])
        _assert_clean(code, text)
        assert code == 0, text
        listed = ResultStore(runs).completed_ids()
        assert "good" in listed
        if "bad" in listed:  # accepted: then it is a well-formed record with its companion intact
            from gnnprivacy.records.record import _decode, record_problem

            assert record_problem(_decode(json.loads((runs / "bad.json").read_text()))) is None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
