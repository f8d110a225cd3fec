"""Where a link-stealing experiment's graphs and pairs come from: the named protocols, the
attacker's reference labels and the n-hop pairs of GRID's own goal.

Protocols (``LinkStealingSettings.protocol``):

* ``d1`` (default; spec 003 §6.1, GRID's reading): the target model trains on D1 (40% of the
  nodes, induced), the attacker's shadow graph is D2, the attack is tested on D4 (20% of D1's
  edges plus as many non-edges) and the supervised attacks train on A* (half of the other D1
  edges plus as many non-edges). See `gnnprivacy.datasets.link_splits`.
* ``he-full`` (He et al.'s own pipeline): the target model trains on the *full* graph with the
  split the dataset was loaded with (the public Planetoid split for Cora / CiteSeer / PubMed);
  the attack's pair pool is every undirected edge plus as many uniformly random non-edges; the
  edges are shuffled and the k-th edge paired with the k-th non-edge, the first half of the pool
  is the attacker's known training pairs (A*) and the last tenth the test pairs (He et al.'s
  reference code: ``train_ratio 0.5`` for training, the ``0.9`` file's complement for testing).
  He et al. take the shadow graph of Attacks 1, 4, 5, 7 from another dataset; here it is D2 of
  the same seed's D1 split (a 40% node sample of the same graph), as in ``d1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnnprivacy.errors import InvalidParameterError

__all__ = ["HE_KNOWN_FRAC", "HE_TEST_FRAC", "PROTOCOLS", "AttackGraphs", "attack_graphs",
           "auc_vs_nhop", "he_full_pairs", "nhop_pairs", "reference_graph"]

PROTOCOLS = ("d1", "he-full")
#: He et al.'s reference code: the attacker knows the first half of the pair pool and is tested
#: on its last tenth
HE_KNOWN_FRAC = 0.5
HE_TEST_FRAC = 0.1


@dataclass
class AttackGraphs:
    """The graphs and pair sets of one experiment. Pair indices are local to their graph
    (``d4`` and ``known`` to ``target``, ``shadow`` to ``d2``, ``d3_pairs`` to ``d3``)."""

    protocol: str
    target: object      # PyG Data: the target model's training graph, the graph GRID defends
    d2: object
    d3: object
    d4: object          # PairSet: the attack's test pairs
    known: object       # PairSet: A*, the attacker's known training pairs
    shadow: object
    d3_pairs: object
    setting: str
    sizes: dict


def he_full_pairs(edge_index, num_nodes: int, *, seed: int, test_frac: float = HE_TEST_FRAC,
                  known_frac: float = HE_KNOWN_FRAC):
    """He et al.'s pairs on a whole graph: ``(test, known)`` `PairSet` s.

    Every undirected edge, in a random order, is paired with one uniformly random non-edge (no
    duplicates); the first ``known_frac`` of these edge / non-edge couples are the attacker's
    known pairs, the last ``test_frac`` the test pairs (disjoint when the two fractions sum to
    at most 1). Both sets are balanced.
    """
    from gnnprivacy.datasets.link_splits import PairSet, sample_non_edges, undirected_edges

    if known_frac + test_frac > 1.0:
        raise InvalidParameterError("known_frac + test_frac", "at most 1 (disjoint pair sets)",
                                    known_frac + test_frac)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4004]))
    edges = undirected_edges(edge_index)
    if len(edges) < 2:
        raise InvalidParameterError("data", "a graph with at least 2 edges", f"{len(edges)} edges")
    edges = edges[rng.permutation(len(edges))]
    non = sample_non_edges(num_nodes, len(edges), edges, generator=rng)
    n_known = int(round(known_frac * len(edges)))
    n_test = min(max(1, int(round(test_frac * len(edges)))), len(edges) - n_known)

    def pairs(idx):
        pos, neg = edges[idx], non[idx]
        return PairSet(np.r_[pos[:, 0], neg[:, 0]].astype(np.int64),
                       np.r_[pos[:, 1], neg[:, 1]].astype(np.int64),
                       np.r_[np.ones(len(idx), np.int64), np.zeros(len(idx), np.int64)])

    all_idx = np.arange(len(edges))
    return pairs(all_idx[len(edges) - n_test:]), pairs(all_idx[:n_known])


def _full_graph(data):
    """The full graph with the masks it was loaded with (its public split where it has one)."""
    import torch
    from torch_geometric.data import Data

    out = Data(x=data.x, y=data.y, edge_index=data.edge_index, num_nodes=int(data.num_nodes))
    for key in ("train_mask", "val_mask", "test_mask"):
        mask = getattr(data, key, None)
        out[key] = (torch.zeros(out.num_nodes, dtype=torch.bool) if mask is None
                    else mask.clone().bool())
    if not bool(out.train_mask.any()):
        raise InvalidParameterError("data.train_mask", "a non-empty training set (protocol "
                                    "'he-full' trains the target on the loaded split)", "no node")
    return out


def attack_graphs(data, protocol: str, *, seed: int, setting: str) -> AttackGraphs:
    """Draw the graphs and pairs of ``protocol`` (``d1`` or ``he-full``) from ``data``."""
    from gnnprivacy.datasets.link_splits import attack_splits

    splits = attack_splits(data, seed=seed, setting=setting)
    d1, d2, d3 = splits.d1.to_data(), splits.d2.to_data(), splits.d3.to_data()
    if protocol == "d1":
        return AttackGraphs("d1", d1, d2, d3, splits.d4, splits.known, splits.shadow,
                            splits.d3_pairs, setting, splits.sizes())
    target = _full_graph(data)
    test, known = he_full_pairs(target.edge_index.cpu().numpy(), target.num_nodes, seed=seed)
    sizes = {"target_nodes": target.num_nodes, "target_edges": int(target.edge_index.shape[1]) // 2,
             "target_train_nodes": int(target.train_mask.sum()),
             "target_test_nodes": int(target.test_mask.sum()),
             "test_pairs": len(test), "known_pairs": len(known),
             "d2_nodes": splits.d2.num_nodes, "shadow_pairs": len(splits.shadow),
             "d3_nodes": splits.d3.num_nodes, "d3_pairs": len(splits.d3_pairs)}
    return AttackGraphs("he-full", target, d2, d3, test, known, splits.shadow, splits.d3_pairs,
                        "transductive", sizes)


def reference_graph(target, frac: float | None, *, seed: int):
    """The graph the attacker's reference MLP trains on.

    ``frac=None``: ``target`` itself, i.e. the target model's own training and validation labels
    (70% / 10% of D1 under ``d1``, the public split under ``he-full``; He et al.'s reference code
    uses the ground-truth training labels). A share ``frac`` in (0, 1]: the attacker knows the
    labels of a uniformly random ``round(frac * N)`` nodes of the target graph; one eighth of them
    (the 70 : 10 ratio of D1's masks) is held out for early stopping, the rest trains.

    Raises:
        InvalidParameterError: fewer than 2 training labels on this graph.
    """
    import torch

    if frac is None:
        return target
    n = int(target.num_nodes)
    known = int(round(frac * n))
    n_val = known // 8
    if known - n_val < 2:
        raise InvalidParameterError(
            "reference_label_frac", f"large enough for at least 2 training labels on this "
            f"graph ({n} nodes: at least {2.0 / n:.3g})", frac)
    perm = np.random.default_rng(np.random.SeedSequence([seed, 5005])).permutation(n)
    train, val = np.zeros(n, bool), np.zeros(n, bool)
    val[perm[:n_val]] = True
    train[perm[n_val:known]] = True
    out = target.clone()
    out.train_mask, out.val_mask = torch.from_numpy(train), torch.from_numpy(val)
    return out


def nhop_pairs(edge_index, num_nodes: int, n: int, count: int, exclude, rng) -> np.ndarray:
    """Up to ``count`` distinct pairs ``u < w`` at distance exactly ``n`` in the graph, drawn
    uniformly without replacement, not in ``exclude`` (a set of ``(u, w)``)."""
    from gnnprivacy.datasets.link_splits import undirected_edges
    from gnnprivacy.defenses.grid.nhop import adjacency, nhop_rows

    adj = adjacency(undirected_edges(np.asarray(edge_index)), num_nodes)
    q = nhop_rows(adj, np.arange(num_nodes), n).tocoo()
    keep = q.row < q.col
    pairs = np.stack([q.row[keep], q.col[keep]], 1).astype(np.int64)
    if len(pairs) and exclude:
        pairs = pairs[[tuple(p) not in exclude for p in pairs.tolist()]]
    return pairs[rng.permutation(len(pairs))[:count]]


def auc_vs_nhop(released, edge_index, num_nodes: int, n: int, *, metric: str, seed: int,
                clean=None) -> dict[str, float]:
    """GRID's own goal, measured: Attack-0's AUC on linked pairs against n-hop pairs.

    Linked pairs are every undirected edge of the graph GRID defends; the other class is as many
    pairs at distance exactly ``n`` (uniform, without replacement; fewer when fewer exist).
    The score is Attack-0's: minus the ``metric`` distance of the two released posteriors. The
    AUC is raw (not flipped): 0.5 means linked pairs look like n-hop pairs, below 0.5 that a
    defence pushed them further apart than n-hop pairs. The pairs depend on the graph and the
    seed only, so runs with and without a defence are scored on the same pairs.

    Returns ``{"auc_vs_nhop": ..., "nhop_pairs": ...}`` plus ``auc_vs_nhop_clean`` (the same pairs
    on the undefended posteriors) when ``clean`` is given, and ``auc_vs_nhop_label_only``: the
    AUC of the score "same released top-1 label" on the same pairs, which no label-preserving
    defence (GRID, MemGuard) can change, and ``auc_vs_nhop_same_label``: ``auc_vs_nhop`` on the
    pairs whose two released top-1 labels agree (linked against n-hop), i.e. with the label mix
    of the two classes taken out; NaN without n-hop pairs.
    """
    from gnnprivacy.attacks.link_stealing.features import DISTANCES, distances
    from gnnprivacy.attacks.metrics import attack_metrics
    from gnnprivacy.datasets.link_splits import undirected_edges

    edges = undirected_edges(np.asarray(edge_index))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 6006]))
    far = nhop_pairs(edge_index, num_nodes, n, len(edges), set(), rng)
    out = {"nhop_pairs": float(len(far))}
    k = DISTANCES.index(metric)
    labels = np.r_[np.ones(len(edges)), np.zeros(len(far))]
    keys = ("auc_vs_nhop", "auc_vs_nhop_clean", "auc_vs_nhop_label_only", "auc_vs_nhop_same_label")
    if len(far) == 0 or len(edges) == 0:
        return {**out, **{key: float("nan") for key in keys if key != "auc_vs_nhop_clean" or
                          clean is not None}}
    both = np.concatenate([edges, far])
    top = np.asarray(released).argmax(1)
    same = top[both[:, 0]] == top[both[:, 1]]

    def auc(probs, keep=slice(None)):
        lab = labels[keep]
        if not 0 < lab.sum() < len(lab):  # one class is empty (no same-label pair, say)
            return float("nan")
        p = np.asarray(probs)
        d = distances(p[both[keep, 0]], p[both[keep, 1]])[:, k]
        return float(attack_metrics(-d, lab)["auc"])

    out["auc_vs_nhop"] = auc(released)
    if clean is not None:
        out["auc_vs_nhop_clean"] = auc(clean)
    out["auc_vs_nhop_label_only"] = float(attack_metrics(same.astype(np.float64), labels)["auc"])
    out["auc_vs_nhop_same_label"] = auc(released, same)
    return out
