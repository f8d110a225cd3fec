"""benchmarks/_cli.py: the comma-list converters the benchmarks parse with, and the resumable
JSON-lines results file of the claims scripts (a rerun skips the cells already written)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import _cli  # noqa: E402
import linkteller_claims  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=_cli.int_list, default="0,1,2")
    ap.add_argument("--epsilons", type=_cli.float_list, default="8,2")
    ap.add_argument("--datasets", type=_cli.name_list, default="cora,citeseer")
    return ap


def test_comma_lists_parse_the_defaults_and_the_given_values():
    args = _parser().parse_args([])
    assert (args.seeds, args.epsilons, args.datasets) == ([0, 1, 2], [8.0, 2.0], ["cora", "citeseer"])
    args = _parser().parse_args(["--seeds", "5", "--epsilons", "0.5,1e3", "--datasets", "cs"])
    assert (args.seeds, args.epsilons, args.datasets) == ([5], [0.5, 1000.0], ["cs"])


@pytest.mark.parametrize("option, value", [("--seeds", "0,x"), ("--seeds", "1.5"),
                                           ("--epsilons", "8,,2")])
def test_a_bad_item_is_a_usage_error(option, value, capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args([option, value])
    assert exc.value.code == 2
    assert f"invalid {'int' if option == '--seeds' else 'float'}_list value" in capsys.readouterr().err


def test_results_file_resumes_from_the_rows_written(tmp_path, capsys):
    out, done = _cli.resume_rows(tmp_path / "new" / "r.jsonl", ("m", "seed"))
    assert done == set() and out.parent.is_dir() and not out.exists()
    _cli.append_row(out, {"m": "a", "seed": 0, "acc": 0.5})
    _cli.append_row(out, {"m": "b", "seed": 1, "acc": 0.25})
    assert capsys.readouterr().out.splitlines() == [
        json.dumps({"m": "a", "seed": 0, "acc": 0.5}), json.dumps({"m": "b", "seed": 1, "acc": 0.25})]
    assert _cli.resume_rows(out, ("m", "seed"))[1] == {("a", 0), ("b", 1)}
    other = tmp_path / "other.jsonl"
    _cli.append_row(other, {"m": "c", "seed": 2})
    assert [r["m"] for r in _cli.read_rows([out, other])] == ["a", "b", "c"]


def test_linkteller_claims_skips_the_cells_already_in_its_file(tmp_path, monkeypatch, capsys):
    """The script's own key (method, eps_e, private_edge_frac, seed): a cell already written
    is not run again, every other victim is, and the summary reads the file back."""
    import gnnprivacy.experiments.linkteller_run as lt

    calls = []

    def fake(dataset, *, method, eps_e, private_edge_frac, seed, data_root):
        calls.append((method, eps_e, private_edge_frac, seed))
        return {"auc": 0.5, "auc_beyond_public": 0.5, "average_precision": 0.5,
                "model_test_accuracy": 0.8, "num_positives": 10, "num_positives_beyond_public": 4}

    monkeypatch.setattr(lt, "run_linkteller", fake)
    out = tmp_path / "lt.jsonl"
    first = {"method": "edgerr", "eps_e": 0.4, "private_edge_frac": 1.0, "seed": 0,
             "dataset": "cora", "auc": 0.5, "auc_beyond_public": 0.5, "average_precision": 0.5,
             "model_test_accuracy": 0.8, "num_positives": 10, "num_positives_beyond_public": 4}
    out.write_text(json.dumps(first) + "\n")
    args = argparse.Namespace(out=str(out), seeds=[0], dataset="cora", root="unused")
    linkteller_claims.run(args)
    victims = [(m, e, rho, 0) for m, e, rho in linkteller_claims.VICTIMS]
    assert calls == [v for v in victims if v != ("edgerr", 0.4, 1.0, 0)]
    assert len(out.read_text().splitlines()) == len(victims)
    linkteller_claims.run(args)                       # everything is done: nothing runs again
    assert len(calls) == len(victims) - 1
    capsys.readouterr()
    linkteller_claims.summary([str(out)])
    assert "| edgerr | 1 | 0.4 | 0.500 +- 0.000 (1)" in capsys.readouterr().out
