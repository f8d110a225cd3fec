"""Inductive link stealing (ILS; Wu et al., PoPETs 2024), attacks A2 and A9 (spec 003 §3.3).

The attacker queries an *inductive* model with a per-node query subgraph: for a tested pair
``(u, w)``, node ``u``'s posterior is the model's softmax at ``u`` on ``u``'s 2-hop ego graph,
computed after removing the edge ``(u, w)`` (so the answer does not contain the tested edge
trivially); likewise for ``w``.

* **A2** (posterior only): features ``[had, avg, wl1, wl2](p_u, p_w)`` (4A), MLP 4A-128-32-2.
* **A9** (combined): a three-branch MLP: posteriors 4A-128-64-16, attributes ``had(x_u, x_w)``
  |x|-128-64-16, graph features ``[Jaccard, preferential attachment, #common neighbours]``
  (on the graph without the tested edge) 3-4; concatenated 36-2.

Both are trained on the shadow graph's pairs (with the shadow model) and tested on the target's
pairs; Adam (lr 0.006, step decay), 200 epochs, batch 1000. Under GRID with the default
``node_keyed`` release, a *training* node's answer is always its precomputed released vector, so
target queries return GRID's outputs (``released`` argument).
"""

from __future__ import annotations

import numpy as np

from gnnprivacy.attacks.base import AttackOutcome
from gnnprivacy.datasets.link_splits import PairSet

__all__ = ["ILS_ATTACKS", "ils_query_posteriors", "run_ils_attack"]

ILS_ATTACKS = ("A2", "A9")


def _neighbors(edge_index: np.ndarray, n: int) -> list[set[int]]:
    nb = [set() for _ in range(n)]
    for a, b in edge_index.T.tolist():
        if a != b:
            nb[a].add(b)
            nb[b].add(a)
    return nb


def ils_query_posteriors(query, x, edge_index: np.ndarray, pairs: PairSet, hops: int = 2,
                         batch: int = 256):
    """Posteriors of ``u`` and ``w`` for every pair, each from its ``hops``-hop ego graph
    with the pair's edge removed; returns two ``(P, A)`` arrays.

    ``query(x_sub, edge_index_sub)`` returns the model's logits on a subgraph. The ego graphs
    are sent ``batch`` at a time as one disjoint union (message passing never crosses between
    components, so each centre's output is the one its ego graph alone gives): one query per
    batch instead of two per pair, which on merged AIDS cut the attack from minutes to seconds.
    """
    import torch

    n = x.shape[0]
    nb = _neighbors(edge_index, n)
    egos = []                                    # (nodes, local edges, centre's local index)
    for u, w in zip(pairs.u.tolist(), pairs.w.tolist()):
        for node, other in ((u, w), (w, u)):
            seen, frontier = {node}, {node}
            for _ in range(hops):
                nxt = set()
                for a in frontier:
                    nxt |= {b for b in nb[a] if not ({a, b} == {node, other})}
                frontier = nxt - seen
                seen |= frontier
            nodes = sorted(seen)
            index = {k: i for i, k in enumerate(nodes)}
            es = [(index[a], index[b]) for a in nodes for b in nb[a]
                  if b in index and {a, b} != {node, other}]
            egos.append((nodes, es, index[node]))
    out = []
    for start in range(0, len(egos), batch):
        chunk = egos[start:start + batch]
        offsets = np.cumsum([0] + [len(nodes) for nodes, _, _ in chunk])
        nodes = torch.as_tensor(np.concatenate([nodes for nodes, _, _ in chunk]), dtype=torch.long)
        es = [np.asarray(e, dtype=np.int64).reshape(-1, 2) + off
              for (_, e, _), off in zip(chunk, offsets[:-1])]
        ei = torch.as_tensor(np.concatenate(es).T.copy(), dtype=torch.long)
        centres = torch.as_tensor([off + c for (_, _, c), off in zip(chunk, offsets[:-1])])
        with torch.no_grad():
            logits = query(x[nodes], ei)
        out.append(torch.softmax(logits[centres].double(), 1).numpy())
    probs = np.concatenate(out) if out else np.zeros((0, 0))
    return probs[0::2], probs[1::2]


def _graph_features(edge_index: np.ndarray, n: int, pairs: PairSet) -> np.ndarray:
    nb = _neighbors(edge_index, n)
    rows = []
    for u, w in zip(pairs.u.tolist(), pairs.w.tolist()):
        a, b = nb[u] - {w}, nb[w] - {u}
        inter, union = len(a & b), len(a | b)
        rows.append([inter / union if union else 0.0, len(a) * len(b), inter])
    return np.asarray(rows, dtype=np.float64)


def _post_feats(pu, pw):
    return np.hstack([pu * pw, (pu + pw) / 2, np.abs(pu - pw), (pu - pw) ** 2])


class _ThreeBranch:
    def __init__(self, dims, seed):
        import torch

        torch.manual_seed(seed)
        nn = torch.nn
        self.post = nn.Sequential(nn.Linear(dims[0], 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                                  nn.Linear(64, 16), nn.ReLU())
        self.attr = nn.Sequential(nn.Linear(dims[1], 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                                  nn.Linear(64, 16), nn.ReLU()) if dims[1] else None
        self.graph = nn.Sequential(nn.Linear(3, 4), nn.ReLU()) if dims[2] else None
        width = 16 + (16 if dims[1] else 0) + (4 if dims[2] else 0)
        self.head = nn.Linear(width, 2)
        self.dims = dims

    def parameters(self):
        mods = [self.post, self.attr, self.graph, self.head]
        return [p for m in mods if m is not None for p in m.parameters()]

    def __call__(self, x):
        import torch

        d0, d1, _ = self.dims
        parts = [self.post(x[:, :d0])]
        if self.attr is not None:
            parts.append(self.attr(x[:, d0:d0 + d1]))
        if self.graph is not None:
            parts.append(self.graph(x[:, d0 + d1:]))
        return self.head(torch.cat(parts, 1))


def _fit_predict(dims, x_train, y_train, x_test, seed, epochs=200, batch=1000):
    import torch

    mean, std = x_train.mean(0), x_train.std(0)
    std = np.where(std > 0, std, 1.0)
    xt = torch.tensor((x_train - mean) / std, dtype=torch.float32)
    yt = torch.tensor(y_train, dtype=torch.long)
    with torch.random.fork_rng(devices=[]):
        if dims[1] == 0 and dims[2] == 0:  # A2: plain MLP 4A-128-32-2
            torch.manual_seed(seed)
            model = torch.nn.Sequential(torch.nn.Linear(dims[0], 128), torch.nn.ReLU(),
                                        torch.nn.Linear(128, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
            params = model.parameters()
        else:
            model = _ThreeBranch(dims, seed)
            params = model.parameters()
        opt = torch.optim.Adam(params, lr=0.006)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(epochs):
            perm = torch.randperm(len(yt), generator=gen)
            for s in range(0, len(yt), batch):
                idx = perm[s:s + batch]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
                opt.step()
            sched.step()
        with torch.no_grad():
            xs = torch.tensor((x_test - mean) / std, dtype=torch.float32)
            return torch.softmax(model(xs), 1)[:, 1].double().numpy()


def run_ils_attack(attack: str, *, shadow_query, shadow_x, shadow_edges, shadow_pairs: PairSet,
                   target_query, target_x, target_edges, test_pairs: PairSet,
                   released: np.ndarray | None = None, seed: int = 0) -> AttackOutcome:
    """Run ILS ``A2`` or ``A9``.

    ``shadow_query`` / ``target_query``: ``fn(x_sub, edge_index_sub) -> logits`` of the shadow /
    target model. ``released`` (node-keyed GRID outputs of the target graph) replaces the
    target's subgraph answers when given.
    """
    if attack not in ILS_ATTACKS:
        raise ValueError(f"unknown ILS attack {attack!r}; choices: {ILS_ATTACKS}")

    def features(query, x, edges, pairs, rel):
        if rel is None:
            pu, pw = ils_query_posteriors(query, x, edges, pairs)
        else:
            pu, pw = rel[pairs.u], rel[pairs.w]
        parts = [_post_feats(pu, pw)]
        if attack == "A9":
            xn = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
            parts += [xn[pairs.u] * xn[pairs.w], _graph_features(edges, xn.shape[0], pairs)]
        return np.hstack(parts)

    x_train = features(shadow_query, shadow_x, shadow_edges, shadow_pairs, None)
    x_test = features(target_query, target_x, target_edges, test_pairs, released)
    dims = ((x_train.shape[1], 0, 0) if attack == "A2"
            else (x_train.shape[1] - shadow_x.shape[1] - 3, shadow_x.shape[1], 3))
    scores = _fit_predict(dims, x_train, shadow_pairs.label, x_test, seed)
    return AttackOutcome(scores=scores, labels=test_pairs.label, threshold=0.5,
                         info={"feature_dim": int(x_test.shape[1]), "train_pairs": len(shadow_pairs)})
