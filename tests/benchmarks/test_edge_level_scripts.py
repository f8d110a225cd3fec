"""The issue-46 benchmark scripts: edge_level_claims and link_prediction_claims resume from
their JSON-lines files and record a refusal as a result; bench_edge_dp_step times a cell."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_edge_dp_step  # noqa: E402
import edge_level_claims  # noqa: E402
import link_prediction_claims  # noqa: E402


def _args(**kw):
    import argparse

    base = {"datasets": ["csbm"], "epsilons": [1.0], "seeds": [0], "root": None,
            "attack_epsilons": None,
            "targets": 10, "attacks": True, "methods": ["edge-dp", "edge-rand", "mlp"]}
    return argparse.Namespace(**{**base, **kw})


def test_claims_resume_and_record_refusals(tmp_path, monkeypatch, capsys):
    from gnnprivacy.errors import InvalidParameterError

    calls = []

    def victim(method, data, eps, seed):
        calls.append(method)
        if method == "edge-rand":
            raise InvalidParameterError("epsilon", "a budget whose output fits", eps)
        return (lambda x: x), 0.5, eps, {}

    monkeypatch.setattr(edge_level_claims, "_victim", victim)
    monkeypatch.setattr(edge_level_claims, "_attacks", lambda *a: {"linkteller_auc": 0.5,
                                                                    "link_stealing_auc": 0.6})
    out = tmp_path / "r.jsonl"
    edge_level_claims.run(_args(out=str(out)))
    assert calls == ["edge-dp", "edge-rand", "mlp"]
    edge_level_claims.run(_args(out=str(out)))          # every cell is in the file
    assert calls == ["edge-dp", "edge-rand", "mlp"]
    capsys.readouterr()
    edge_level_claims.summary([out])
    text = capsys.readouterr().out
    assert "| edge-rand | 1 | refused: " in text and "| mlp | - | 0.500" in text


def test_paired_differences_say_beats_only_when_every_seed_agrees():
    """edge-dp minus an anchor, paired by seed: a difference that holds on every seed is
    above zero; a mean lead with one seed against it is not (the broken control)."""
    def rows(ours, theirs):
        return ([{"dataset": "d", "method": "edge-dp", "epsilon": 8.0, "seed": s,
                  "test_accuracy": a} for s, a in enumerate(ours)]
                + [{"dataset": "d", "method": "edge-rand", "epsilon": 8.0, "seed": s,
                    "test_accuracy": a} for s, a in enumerate(theirs)]
                + [{"dataset": "d", "method": "edge-rand", "epsilon": 1.0, "seed": 0,
                    "refused": "too many edges"}])

    clear = edge_level_claims.paired_differences(rows([0.90, 0.89, 0.91],
                                                      [0.88, 0.875, 0.89]), "d")
    assert [(d["anchor"], d["epsilon"], d["n"], d["beats"]) for d in clear] == \
        [("edge-rand", 8.0, 3, True)]
    assert clear[0]["mean"] == pytest.approx((0.02 + 0.015 + 0.02) / 3)
    mixed = edge_level_claims.paired_differences(rows([0.90, 0.86, 0.91],
                                                      [0.88, 0.875, 0.89]), "d")
    assert mixed[0]["mean"] > 0 and not mixed[0]["beats"]


def test_link_summary_reads_rows(tmp_path, capsys):
    import json

    out = tmp_path / "l.jsonl"
    rows = [{"dataset": "cora", "privacy": p, "epsilon": e, "seed": s, "test_auc": 0.5 + s / 10,
             "test_hits@50": 0.1} for p, e in (("none", None), ("edge", 1.0)) for s in (0, 1)]
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    link_prediction_claims.summary([out])
    text = capsys.readouterr().out
    assert "| cora | none | - | 0.550 +- " in text and "| cora | edge | 1 |" in text


@pytest.mark.slow
def test_step_benchmark_times_one_cell():
    data = bench_edge_dp_step.graph(400, 1500, 16, 3)
    r = bench_edge_dp_step.cell(data, "sage1", 8, 32, 3)
    assert r["dp_ms"] > 0 and r["plain_ms"] > 0 and r["ratio"] > 0
