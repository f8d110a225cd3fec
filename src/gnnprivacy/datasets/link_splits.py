"""Node and pair splits for link-stealing experiments (spec 003 §6.1: D1, D2, D3, D4, A*).

From one graph ``D``:

* **D1** (target training graph): 40% of the nodes and the subgraph they induce.
* **D2** (the attacker's shadow graph): another 40% of the nodes, induced.
* **D3** (the defender's auxiliary graph; inductive models are evaluated on it): the last 20%.
* **D4** (attack test pairs): 20% of D1's undirected edges (positives) plus as many uniformly
  random D1 non-edges (negatives).
* **A\\*** (the attacker's known part of the target graph): 50% of D1's edges not in D4, plus
  as many D1 non-edges disjoint from D4's negatives.
* Shadow pairs: all D2 edges plus as many D2 non-edges; D3 pairs likewise.

Citation graphs use uniform node sampling and the induced subgraphs (``split="induced"``;
this keeps about 16% of the links, spec §9 A11). Graphs that are disjoint unions of small
graphs (the merged TU datasets, which carry ``graph_id``) default to ``split="component"``:
whole graphs are assigned to D1 / D2 / D3 until each reaches its node share.

Transductive training (GCN) labels 70% of D1's nodes for training and 10% for validation and
masks the labels of the other 20%, on which the model accuracy is measured. Inductive models
are trained on D1 (90% / 10%) and evaluated on D3's graph.

Everything is drawn from one ``numpy.random.Generator`` seeded by ``seed``; the split is a
pure function of ``(graph, seed, fractions)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gnnprivacy._validation import check_choice, check_int, check_probability
from gnnprivacy.errors import InvalidParameterError

__all__ = ["AttackSplits", "GraphPart", "PairSet", "attack_splits", "undirected_edges",
           "sample_non_edges"]


@dataclass(frozen=True)
class PairSet:
    """Unordered node pairs ``(u[k], w[k])`` with ``u < w`` and binary labels (1 = linked)."""

    u: np.ndarray
    w: np.ndarray
    label: np.ndarray

    def __len__(self) -> int:
        return int(self.u.size)

    @staticmethod
    def concat(*sets: "PairSet") -> "PairSet":
        return PairSet(np.concatenate([s.u for s in sets]), np.concatenate([s.w for s in sets]),
                       np.concatenate([s.label for s in sets]))


@dataclass
class GraphPart:
    """An induced subgraph: global node ids, relabelled ``edge_index`` (both directions), x, y,
    and node masks (train / val / test) for the target model."""

    nodes: np.ndarray
    edge_index: np.ndarray
    x: object
    y: object
    train_mask: np.ndarray = field(default=None)
    val_mask: np.ndarray = field(default=None)
    test_mask: np.ndarray = field(default=None)

    @property
    def num_nodes(self) -> int:
        return int(self.nodes.size)

    def to_data(self):
        """A PyG ``Data`` (x, y, edge_index, masks) of this part."""
        import torch
        from torch_geometric.data import Data

        out = Data(x=self.x, y=self.y, edge_index=torch.from_numpy(self.edge_index),
                   num_nodes=self.num_nodes)
        n = self.num_nodes
        for key in ("train_mask", "val_mask", "test_mask"):
            mask = getattr(self, key)
            out[key] = torch.from_numpy(np.zeros(n, bool) if mask is None else mask)
        return out


@dataclass
class AttackSplits:
    """The D1-D4 splits of spec 003 §6.1 (see the module docstring)."""

    d1: GraphPart
    d2: GraphPart
    d3: GraphPart
    d4: PairSet
    known: PairSet
    shadow: PairSet
    d3_pairs: PairSet
    seed: int
    kind: str
    setting: str

    def sizes(self) -> dict[str, int]:
        """Node, edge and pair counts (for run records)."""
        return {"d1_nodes": self.d1.num_nodes, "d1_edges": self.d1.edge_index.shape[1] // 2,
                "d2_nodes": self.d2.num_nodes, "d2_edges": self.d2.edge_index.shape[1] // 2,
                "d3_nodes": self.d3.num_nodes, "d3_edges": self.d3.edge_index.shape[1] // 2,
                "d4_pairs": len(self.d4), "known_pairs": len(self.known),
                "shadow_pairs": len(self.shadow), "d3_pairs": len(self.d3_pairs)}


def undirected_edges(edge_index: np.ndarray, num_nodes: int | None = None) -> np.ndarray:
    """Unique undirected edges ``(E, 2)`` with ``i < j`` (self-loops dropped), sorted."""
    ei = np.asarray(edge_index, dtype=np.int64)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise InvalidParameterError("edge_index", "an integer array of shape (2, E)", ei.shape)
    a, b = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    keep = a != b
    pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0)
    return pairs.reshape(-1, 2)


def sample_non_edges(num_nodes: int, count: int, edges: np.ndarray, *,
                     generator: np.random.Generator, exclude: np.ndarray | None = None) -> np.ndarray:
    """``count`` distinct uniformly random unordered pairs ``i < j`` that are not edges.

    Pairs in ``exclude`` (shape ``(k, 2)``, ``i < j``) are not drawn either. Rejection sampling
    over all node pairs (He et al.'s reference procedure).

    Raises:
        InvalidParameterError: fewer than ``count`` admissible pairs exist.
    """
    n = int(num_nodes)
    total = n * (n - 1) // 2
    taken = set((edges[:, 0] * n + edges[:, 1]).tolist())
    if exclude is not None and len(exclude):
        taken |= set((exclude[:, 0] * n + exclude[:, 1]).tolist())
    if count > total - len(taken):
        raise InvalidParameterError("count", f"at most {total - len(taken)} non-edges", count)
    out: list[int] = []
    chosen: set[int] = set()
    while len(out) < count:
        need = count - len(out)
        i = generator.integers(0, n, size=2 * need + 16)
        j = generator.integers(0, n, size=2 * need + 16)
        for a, b in zip(np.minimum(i, j).tolist(), np.maximum(i, j).tolist()):
            if a == b:
                continue
            key = a * n + b
            if key in taken or key in chosen:
                continue
            chosen.add(key)
            out.append(key)
            if len(out) == count:
                break
    keys = np.asarray(out, dtype=np.int64).reshape(-1)
    return np.stack([keys // n, keys % n], axis=1) if keys.size else np.zeros((0, 2), np.int64)


def _pairs(pos: np.ndarray, neg: np.ndarray) -> PairSet:
    u = np.concatenate([pos[:, 0], neg[:, 0]]).astype(np.int64)
    w = np.concatenate([pos[:, 1], neg[:, 1]]).astype(np.int64)
    lab = np.concatenate([np.ones(len(pos), np.int64), np.zeros(len(neg), np.int64)])
    return PairSet(u, w, lab)


def _induced(data, nodes: np.ndarray) -> GraphPart:
    import torch

    nodes = np.sort(nodes)
    n = int(data.num_nodes)
    relabel = np.full(n, -1, dtype=np.int64)
    relabel[nodes] = np.arange(nodes.size)
    ei = data.edge_index.cpu().numpy()
    keep = (relabel[ei[0]] >= 0) & (relabel[ei[1]] >= 0)
    sub_ei = relabel[ei[:, keep]]
    idx = torch.from_numpy(nodes)
    return GraphPart(nodes=nodes, edge_index=np.ascontiguousarray(sub_ei), x=data.x[idx],
                     y=data.y[idx])


def _partition_nodes(data, fracs, kind: str, rng: np.random.Generator):
    n = int(data.num_nodes)
    if kind == "induced":
        perm = rng.permutation(n)
        n1 = int(round(fracs[0] * n))
        n2 = int(round(fracs[1] * n))
        return perm[:n1], perm[n1:n1 + n2], perm[n1 + n2:]
    gid = getattr(data, "graph_id", None)
    if gid is None:
        raise InvalidParameterError("split", "'induced' for a graph without graph_id "
                                    "('component' needs a disjoint union of graphs)", kind)
    gid = np.asarray(gid.cpu().numpy() if hasattr(gid, "cpu") else gid, dtype=np.int64)
    graphs = rng.permutation(np.unique(gid))
    sizes = np.bincount(gid)[graphs]
    cum = np.cumsum(sizes)
    c1 = int(np.searchsorted(cum, fracs[0] * n))
    c2 = int(np.searchsorted(cum, (fracs[0] + fracs[1]) * n))
    groups = (graphs[:c1 + 1], graphs[c1 + 1:c2 + 1], graphs[c2 + 1:])
    return tuple(np.flatnonzero(np.isin(gid, g)) for g in groups)


def _label_masks(part: GraphPart, setting: str, rng: np.random.Generator) -> None:
    n = part.num_nodes
    perm = rng.permutation(n)
    train, val, test = (np.zeros(n, bool) for _ in range(3))
    if setting == "transductive":
        n_test, n_val = int(round(0.2 * n)), int(round(0.1 * n))
        test[perm[:n_test]] = True
        val[perm[n_test:n_test + n_val]] = True
        train[perm[n_test + n_val:]] = True
    else:
        n_val = int(round(0.1 * n))
        val[perm[:n_val]] = True
        train[perm[n_val:]] = True
    part.train_mask, part.val_mask, part.test_mask = train, val, test


def _all_pairs(part: GraphPart, rng: np.random.Generator) -> PairSet:
    pos = undirected_edges(part.edge_index)
    neg = sample_non_edges(part.num_nodes, len(pos), pos, generator=rng)
    return _pairs(pos, neg)


def attack_splits(data, *, seed: int = 0, fractions=(0.4, 0.4, 0.2), test_edge_frac: float = 0.2,
                  known_frac: float = 0.5, split: str | None = None,
                  setting: str = "transductive") -> AttackSplits:
    """Draw the D1-D4 and A* splits of spec 003 §6.1 from ``data``.

    Args:
        data: a PyG ``Data`` (x, y, undirected ``edge_index``; ``graph_id`` for TU unions).
        seed: split seed (>= 0).
        fractions: node shares of D1, D2, D3 (non-negative, summing to 1).
        test_edge_frac: share of D1's edges that become D4's positives.
        known_frac: share of the remaining D1 edges the attacker knows (A*).
        split: ``"induced"`` (uniform nodes) or ``"component"`` (whole graphs); default
            ``"component"`` when ``data`` has ``graph_id``, else ``"induced"``.
        setting: ``"transductive"`` (label masks 70/10/20 on D1) or ``"inductive"`` (90/10).

    Returns:
        `AttackSplits`; node indices in pair sets are local to the part they belong to
        (D4 and A* to D1, shadow pairs to D2, D3 pairs to D3).

    Raises:
        InvalidParameterError: bad fractions or seed, or D1 with fewer than 2 edges.
    """
    seed = check_int("seed", seed, low=0)
    setting = check_choice("setting", setting, ("transductive", "inductive"))
    fr = tuple(float(check_probability("fractions", f)) for f in fractions)
    if len(fr) != 3 or abs(sum(fr) - 1.0) > 1e-9:
        raise InvalidParameterError("fractions", "three shares summing to 1", fractions)
    check_probability("test_edge_frac", test_edge_frac, allow_zero=False, allow_one=False)
    check_probability("known_frac", known_frac)
    if split is None:
        split = "component" if getattr(data, "graph_id", None) is not None else "induced"
    split = check_choice("split", split, ("induced", "component"))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3003]))
    parts = [_induced(data, nodes) for nodes in _partition_nodes(data, fr, split, rng)]
    d1, d2, d3 = parts
    _label_masks(d1, setting, rng)
    _label_masks(d2, setting, rng)
    _label_masks(d3, "inductive", rng)
    edges = undirected_edges(d1.edge_index)
    if len(edges) < 2:
        raise InvalidParameterError("data", "a graph whose D1 part has at least 2 edges",
                                    f"{len(edges)} edges in D1")
    perm = rng.permutation(len(edges))
    n_test = max(1, int(round(test_edge_frac * len(edges))))
    test_pos, rest = edges[perm[:n_test]], edges[perm[n_test:]]
    test_neg = sample_non_edges(d1.num_nodes, n_test, edges, generator=rng)
    n_known = int(round(known_frac * len(rest)))
    known_pos = rest[rng.permutation(len(rest))[:n_known]]
    known_neg = sample_non_edges(d1.num_nodes, n_known, edges, generator=rng, exclude=test_neg)
    return AttackSplits(d1=d1, d2=d2, d3=d3, d4=_pairs(test_pos, test_neg),
                        known=_pairs(known_pos, known_neg), shadow=_all_pairs(d2, rng),
                        d3_pairs=_all_pairs(d3, rng), seed=seed, kind=split, setting=setting)
