"""Link-stealing attacks on GNN posteriors (He et al. 2021) and the GRID experiment pipeline.

``run_link_stealing(dataset=..., model=..., attack=..., defense=...)`` runs and records one
experiment (the same code path as ``gnnprivacy attack link-stealing``).
"""

from __future__ import annotations

from gnnprivacy._lazy import lazy_getattr

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


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
