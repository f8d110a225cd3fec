"""LinkTeller: influence-analysis link stealing (Wu et al., S&P 2022; spec 001 §5.5).

The adversary queries a trained GNN's inference API on a graph it cannot see. For a target
node ``v`` it scales ``v``'s features by ``1 + delta`` and measures how much every other target
``u``'s output moves: ``I(v, u) = ||f(X + delta X_v e_v)_u - f(X)_u|| / delta``. Pairs with a
large influence are predicted to be edges. The pair score here is ``I(v, u) + I(u, v)``.

Evaluation ([R] with spec E19): ``n_targets`` nodes are drawn without replacement from the
endpoints of private edges; positives are the private edges among them, negatives an equal
number of uniformly drawn target pairs that are not private edges and, by default, not public
edges either (the adversary knows those; ``negatives="non_private"`` keeps them, as [R] does).

The adversary also knows the public edges' paths: an L-layer GNN lets ``v`` influence ``u``
through public edges alone whenever they are within L public hops, whatever was done to the
private edges. So the same scores are also evaluated on the pairs *beyond the public receptive
field* (more than ``public_hops`` apart in the public graph; positives and negatives alike):
there, any influence comes from the released private edges (``auc_beyond_public``).

Privacy: an attack; it spends no budget. The model's own guarantee is whatever released the
graph it was trained and queried on.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from gnnprivacy._validation import check_choice, check_int, check_positive
from gnnprivacy.errors import InvalidParameterError

NEGATIVES = ("non_edges", "non_private")

__all__ = ["NEGATIVES", "check_attack_options", "influence_matrix", "linkteller_attack",
           "within_hops"]


@torch.no_grad()
def influence_matrix(predict: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                     targets: torch.Tensor, *, delta: float = 0.01,
                     progress: Callable[[str, int], object] | None = None) -> torch.Tensor:
    """``I[i, j]`` = influence of ``targets[i]`` on ``targets[j]`` (diagonal zeroed).

    One query per target with that target's feature row scaled by ``1 + delta``. The row is
    scaled in place and restored after the query (no copy of ``x`` per target: on Facebook's
    22,470 x 4,714 features a copy was a quarter of the attack's time), so ``x`` is unchanged
    on return, also when ``predict`` raises. A sparse CSR ``x`` has its row's non-zeros scaled.

    Args:
        predict: the inference API, ``features -> outputs (n, c)`` on the server's graph.
        x: the node features the API uses (dense or sparse CSR).
        targets: node ids ``(t,)``.
        delta: relative feature perturbation.
        progress: optional ``progress(description, total)`` returning a task with
            ``update(n)`` (what ``gnnprivacy.experiments.progress.progress_factory`` yields), advanced
            once per target's query.
    """
    delta = check_positive("delta", delta)
    rows = _row_views(x)
    task = progress("linkteller: influence queries", len(targets)) if progress else None
    base = predict(x)[targets]
    out = torch.zeros(len(targets), len(targets))
    for i, v in enumerate(targets.tolist()):
        view = rows(v)
        row = view.clone()
        try:
            view.mul_(1.0 + delta)
            out[i] = (predict(x)[targets] - base).norm(dim=1) / delta
        finally:
            view.copy_(row)
        if task is not None:
            task.update(1)
    out.fill_diagonal_(0.0)
    return out


def _row_views(x: torch.Tensor) -> Callable[[int], torch.Tensor]:
    """``v ->`` a writable view of row ``v``'s stored values (dense: the row; sparse CSR: its
    non-zeros, so scaling them scales the row)."""
    if x.layout == torch.strided:
        return lambda v: x[v]
    if x.layout == torch.sparse_csr:
        crow, values = x.crow_indices(), x.values()
        return lambda v: values[int(crow[v]):int(crow[v + 1])]
    raise InvalidParameterError("x", "a dense or sparse CSR feature matrix", x.layout)


def _pair_keys(pairs: np.ndarray, n: int) -> np.ndarray:
    u, v = np.minimum(pairs[0], pairs[1]), np.maximum(pairs[0], pairs[1])
    return u * n + v


def within_hops(edges: np.ndarray, num_nodes: int, nodes: np.ndarray, hops: int) -> np.ndarray:
    """``R[i, j]``: ``nodes[i]`` and ``nodes[j]`` are at most ``hops`` apart in the undirected
    graph ``edges`` (``(2, m)``; a node reaches itself)."""
    import scipy.sparse as sp

    hops = check_int("hops", hops, low=1)
    e = np.asarray(edges, np.int64).reshape(2, -1)
    adj = sp.coo_matrix((np.ones(2 * e.shape[1], np.int8), (np.r_[e[0], e[1]], np.r_[e[1], e[0]])),
                        shape=(num_nodes, num_nodes)).tocsr()
    adj = (adj + sp.identity(num_nodes, dtype=np.int8, format="csr")).astype(bool)
    reach = adj[nodes]
    for _ in range(hops - 1):
        reach = (reach @ adj).astype(bool)
    return reach[:, nodes].toarray()


def check_attack_options(*, n_targets: int, delta: float, negatives: str, public_hops: int = 2
                         ) -> None:
    """Raise `InvalidParameterError` for a bad attack option (callers that train a
    victim first check these before, as `linkteller_attack` checks them again)."""
    check_int("n_targets", n_targets, low=2)
    check_positive("delta", delta)
    check_choice("negatives", negatives, NEGATIVES)
    check_int("public_hops", public_hops, low=1)


def linkteller_attack(predict, x: torch.Tensor, *, num_nodes: int, private_edges: np.ndarray,
                      public_edges: np.ndarray, n_targets: int = 500, delta: float = 0.01,
                      negatives: str = "non_edges", public_hops: int = 2,
                      generator: np.random.Generator | None = None,
                      progress: Callable[[str, int], object] | None = None) -> dict:
    """Run LinkTeller and score it; returns the attack metrics plus ``average_precision``,
    and the same on the pairs more than ``public_hops`` (the victim's number of message-passing
    layers) apart in the public graph: ``auc_beyond_public``,
    ``average_precision_beyond_public``, ``num_positives_beyond_public``,
    ``num_negatives_beyond_public`` (NaN where either class is empty there).

    Raises:
        InvalidParameterError: no private edge among the sampled targets, bad parameters.
    """
    from sklearn.metrics import average_precision_score

    from gnnprivacy.attacks.metrics import attack_metrics

    check_attack_options(n_targets=n_targets, delta=delta, negatives=negatives,
                         public_hops=public_hops)
    rng = generator if generator is not None else np.random.default_rng()
    n = check_int("num_nodes", num_nodes, low=2)
    pri = np.asarray(private_edges, np.int64).reshape(2, -1)
    pub = np.asarray(public_edges, np.int64).reshape(2, -1)
    pool = np.unique(pri.reshape(-1))
    if pool.size < 2:
        raise InvalidParameterError("private_edges", "at least one private edge", pri.shape[1])
    targets = np.sort(rng.choice(pool, size=min(n_targets, pool.size), replace=False))
    is_target = np.zeros(n, bool)
    is_target[targets] = True
    pri_keys = _pair_keys(pri, n)
    pos = pri[:, is_target[pri[0]] & is_target[pri[1]]]
    if pos.shape[1] == 0:
        raise InvalidParameterError("n_targets", "enough targets to cover a private edge",
                                    n_targets)
    excluded = set(pri_keys.tolist())
    if negatives == "non_edges":
        excluded |= set(_pair_keys(pub, n).tolist())
    neg = []
    while len(neg) < pos.shape[1]:
        u, v = rng.choice(targets, size=2, replace=False)
        key = min(u, v) * n + max(u, v)
        if key not in excluded:
            neg.append((u, v))
            excluded.add(key)
    neg = np.array(neg, np.int64).T
    index = {int(t): i for i, t in enumerate(targets)}
    infl = influence_matrix(predict, x, torch.as_tensor(targets), delta=delta,
                            progress=progress).numpy()
    pairs = np.concatenate([pos, neg], axis=1)
    iu = np.array([index[int(a)] for a in pairs[0]])
    iv = np.array([index[int(b)] for b in pairs[1]])
    scores = infl[iu, iv] + infl[iv, iu]
    labels = np.concatenate([np.ones(pos.shape[1]), np.zeros(neg.shape[1])]).astype(int)
    out = attack_metrics(scores, labels)
    out["average_precision"] = float(average_precision_score(labels, scores))
    beyond = ~within_hops(pub, n, targets, public_hops)[iu, iv]
    lb, sb = labels[beyond], scores[beyond]
    both = lb.size and 0 < lb.sum() < lb.size
    out.update(auc_beyond_public=attack_metrics(sb, lb)["auc"] if both else float("nan"),
               average_precision_beyond_public=float(average_precision_score(lb, sb))
               if both else float("nan"),
               num_positives_beyond_public=int(lb.sum()),
               num_negatives_beyond_public=int(lb.size - lb.sum()), public_hops=public_hops)
    out.update(num_targets=int(targets.size), num_positives=int(pos.shape[1]),
               num_negatives=int(neg.shape[1]), negatives=negatives, delta=delta)
    return out
