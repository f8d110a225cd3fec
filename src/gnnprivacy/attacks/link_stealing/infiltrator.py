"""Link-Infiltrator (Meng et al., CCS 2023), as the GRID paper describes it (spec 003 §3.4, §9 A18).

For a tested pair ``(u, w)`` of an inductive model's graph:

* ``query_node="a"`` (the paper's description): inject node ``a`` linked to ``u`` and query
  ``f(a)``; inject node ``b`` linked to ``w`` and query ``f(a | b)``; score
  ``|f(a | b) - f(a)|_2``. ``b`` reaches ``a`` only through ``a - u - w - b``, so the model needs
  at least 3 message-passing layers.
* ``query_node="w"`` (for 2-layer models, our variant): inject ``a`` linked to ``u`` and score
  ``|f_w(G + a) - f_w(G)|_2``; ``a`` reaches ``w`` within 2 hops only through the edge ``u - w``.

A link is predicted iff the score exceeds ``eta = e^-7``. Injected nodes copy the features of
the node they attach to [ours: the description leaves them unspecified]. Under GRID's per-query
mode every answer is defended from its own query graph (``grid.defend_query``), which is what
creates false positives: the noise itself changes when the query graph changes.
"""

from __future__ import annotations

import math

import numpy as np

from gnnprivacy.attacks.base import AttackOutcome
from gnnprivacy.datasets.link_splits import PairSet

__all__ = ["ETA", "run_link_infiltrator"]

ETA = math.exp(-7)


def run_link_infiltrator(query, x, edge_index: np.ndarray, pairs: PairSet, *,
                         query_node: str = "w", grid=None, eta: float = ETA) -> AttackOutcome:
    """Score every pair; ``query(x, edge_index) -> logits`` runs the target model on a graph.

    ``grid``: a `GRID` whose per-query mode defends every answer.
    """
    import torch

    if query_node not in ("a", "w"):
        raise ValueError(f"query_node must be 'a' or 'w'; got {query_node!r}")
    x = torch.as_tensor(x)
    ei = torch.as_tensor(np.asarray(edge_index), dtype=torch.long)
    n = x.shape[0]

    def answer(xq, eq, node):
        probs = torch.softmax(query(xq, eq).double(), 1).numpy()
        if grid is None:
            return probs[node]
        return grid.defend_query(eq.numpy(), probs, node)

    def inject(xq, eq, attach):
        new = xq.shape[0]
        xq = torch.cat([xq, xq[attach:attach + 1]])
        extra = torch.tensor([[new, attach], [attach, new]], dtype=torch.long)
        return xq, torch.cat([eq, extra], 1), new

    base_cache: dict[int, np.ndarray] = {}
    scores = []
    for u, w in zip(pairs.u.tolist(), pairs.w.tolist()):
        xa, ea, a = inject(x, ei, u)
        if query_node == "w":
            if w not in base_cache:
                base_cache[w] = answer(x, ei, w)
            score = np.linalg.norm(answer(xa, ea, w) - base_cache[w])
        else:
            xb, eb, _ = inject(xa, ea, w)
            score = np.linalg.norm(answer(xb, eb, a) - answer(xa, ea, a))
        scores.append(score)
    scores = np.asarray(scores, dtype=np.float64)
    return AttackOutcome(scores=scores, labels=pairs.label, threshold=eta,
                         info={"query_node": query_node, "eta": eta, "num_nodes": n,
                               "per_query_grid": grid is not None})
