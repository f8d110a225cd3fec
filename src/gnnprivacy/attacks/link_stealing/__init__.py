"""Link-stealing attacks on GNN posteriors (He et al. 2021) and the GRID experiment pipeline.

``run_link_stealing(dataset=..., model=..., attack=..., defense=...)`` runs and records one
experiment (the same code path as ``gnnprivacy attack link-stealing``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnprivacy._lazy import lazy_exports

if TYPE_CHECKING:
    from gnnprivacy.attacks.link_stealing.features import distances, entropy, pair_ops
    from gnnprivacy.attacks.link_stealing.he import NodeView, attack_features, run_he_attack
    from gnnprivacy.attacks.link_stealing.method import run_link_stealing
    from gnnprivacy.nn.pair_classifier import AttackMLP, kmeans_decisions
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings, run_experiment

__all__ = ["AttackMLP", "LinkStealingSettings", "NodeView", "attack_features", "distances",
           "entropy", "kmeans_decisions", "pair_ops", "run_experiment", "run_he_attack",
           "run_link_stealing"]

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
