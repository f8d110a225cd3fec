"""Reproduction checks against spec 003 Tables II-IV (Cora / CiteSeer, GCN, no defence), run with
``pytest -m repro``. GRID's AUC is recorded, not asserted: on our splits it stays far above the
paper's (see docs/grid.md and the 003-tables report)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

DATA = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS",
                           Path(__file__).resolve().parents[3] / "shared" / "datasets"))

pytestmark = [pytest.mark.repro, pytest.mark.dataset,
              pytest.mark.skipif(not (DATA / "MANIFEST.md").is_file(), reason=f"no datasets at {DATA}")]

# (dataset, attack): the paper's no-defence AUC (GCN) and our tolerance in points
PAPER = {("cora", 6): (96.4, 3.0), ("cora", 0): (93.0, 5.0), ("cora", 1): (94.2, 5.0),
         ("citeseer", 0): (94.2, 5.0), ("citeseer", 1): (96.5, 5.0)}


@pytest.mark.parametrize("dataset, attack", sorted(PAPER))
def test_undefended_auc_matches_the_paper(dataset, attack):
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings, run_experiment
    from gnnprivacy.datasets import load_dataset

    data = load_dataset(dataset, root=str(DATA))
    aucs = []
    for seed in range(3):
        clean, _ = run_experiment(data, LinkStealingSettings(attack=attack), seed=seed)
        grid, _ = run_experiment(data, LinkStealingSettings(attack=attack, defense="grid"), seed=seed)
        assert grid["model_test_accuracy"] == clean["model_test_accuracy"]
        assert grid["max_l1_distortion"] <= 0.4 + 1e-9
        aucs.append(100 * clean["auc_flipped"])
    paper, tol = PAPER[(dataset, attack)]
    assert abs(np.mean(aucs) - paper) <= tol, (np.mean(aucs), paper)
