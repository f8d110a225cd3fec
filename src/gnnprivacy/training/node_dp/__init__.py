"""Node-level DP trainers built on the DP-SGD engine (`gnnprivacy.training.dp`).

* `HeterPoissonTrainer`: HeterPoisson star GNNs (spec 000);
* `DPGNNTrainer`: DP-GNN one-layer GCN on degree-bounded subgraphs (spec 002);
* `DPMLPTrainer`: naive DP-SGD on node features (baseline).

All are estimator-like: ``fit(data) -> self``, ``predict``, ``score``, learned state ending
in ``_`` including ``privacy_spent_`` and ``ledger_``.
"""

from gnnprivacy.training.node_dp.dpgnn import DPGNNTrainer, default_delta_dpgnn
from gnnprivacy.training.node_dp.dpmlp import DPMLPTrainer, default_delta_dpmlp
from gnnprivacy.training.node_dp.heterpoisson import HeterPoissonTrainer, default_delta_heterpoisson

__all__ = ["DPGNNTrainer", "DPMLPTrainer", "HeterPoissonTrainer", "default_delta_dpgnn",
           "default_delta_dpmlp", "default_delta_heterpoisson"]
