"""Link-stealing attacks on GNN posteriors (He et al. 2021) and the GRID experiment pipeline.

``run_link_stealing(dataset=..., model=..., attack=..., defense=...)`` runs and records one
experiment (the same code path as ``gnnprivacy attack link-stealing``).
"""

from __future__ import annotations

import importlib

_LAZY = {
    "run_link_stealing": "gnnprivacy.attacks.link_stealing.method",
    "run_experiment": "gnnprivacy.attacks.link_stealing.pipeline",
    "LinkStealingSettings": "gnnprivacy.attacks.link_stealing.pipeline",
    "run_he_attack": "gnnprivacy.attacks.link_stealing.he",
    "NodeView": "gnnprivacy.attacks.link_stealing.he",
    "attack_features": "gnnprivacy.attacks.link_stealing.he",
    "distances": "gnnprivacy.attacks.link_stealing.features",
    "entropy": "gnnprivacy.attacks.link_stealing.features",
    "pair_ops": "gnnprivacy.attacks.link_stealing.features",
    "AttackMLP": "gnnprivacy.attacks.link_stealing.models",
    "kmeans_decisions": "gnnprivacy.attacks.link_stealing.models",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
