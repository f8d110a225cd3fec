"""Link prediction (``--task link``) without privacy, under edge-level DP and under node-level DP.

The split (`link_split`) removes the validation and test edges from the graph before
anything trains: they are never in the message-passing graph, and their negatives are
uniform non-edges of the whole graph.

The model is the user's encoder (any PyG model ``model(x, edge_index) -> embeddings``, one
message-passing layer) with a scaled-cosine decoder. Training draws star subgraphs from a
`make_private` sampler and `LinkSubgraphs` adds, in each centre's own subgraph, the pairs of
its loss: the centre against each neighbour in its star (positives) and against
``negatives`` random nodes appended as edge-less rows (negatives). A pair's two rows lie in
one subgraph, so the per-subgraph clipping bounds each subgraph's whole loss:

* **edge level** (`EdgeSubgraphs`, ``hops=1``): an edge ``{u, v}`` is in the stars of ``u``
  and ``v`` only, as a message and as a positive pair alike (occurrence 2); negatives are
  any nodes (features are public);
* **node level** (`DegreeBoundedSubgraphs`, ``hops=1``): a training node lies in its own
  star and in at most ``D`` others (DP-GNN's bounded graph); negatives come from the
  non-training nodes only (public), so they add no occurrence.

In a training star, the centre's row aggregates its neighbours and a neighbour's or
negative's row reads itself only; the score of a pair is therefore
``s(v, w) = 5 cos(f(v), g(w))`` with ``f`` the aggregated and ``g`` the edge-less
embedding (a dot product of normalised embeddings, so the degree does not scale it), and
evaluation uses the symmetric ``(s(v, w) + s(w, v)) / 2``. Metrics: ROC AUC and Hits@K (the
share of test positives scored above the K-th best test negative, as OGB).

*Privacy.* Edge level: unit edge; the epsilon covers the DP-SGD steps and (``inference=
"noisy"``) the released aggregates the embeddings are computed from. Node level: unit node
(a training node with its features and edges); the embeddings are computed on the training
graph, which reads training nodes: predictions are outside the epsilon (named in the
record's ``unaccounted``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch_geometric.data import Data

from gnnprivacy._validation import check_choice, check_int, check_probability
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.private.samplers import SamplerPlan, SubgraphSampler

__all__ = ["LINK_PRIVACY", "LinkEncoder", "LinkSplit", "LinkSubgraphs", "fit_link_predictor",
           "hits_at_k", "link_split", "pair_scores"]

LINK_PRIVACY = ("none", "edge", "node")


@dataclass
class LinkSplit:
    """``graph``: the message-passing (and training) graph, both directions; ``val`` and
    ``test``: ``(pos, neg)`` pairs ``(2, P)``, none of them an edge of ``graph``."""

    graph: Data
    val: tuple[Tensor, Tensor]
    test: tuple[Tensor, Tensor]
    seed: int

    def sizes(self) -> dict[str, int]:
        return {"train_edges": int(self.graph.edge_index.shape[1]) // 2,
                "val_pairs": int(self.val[0].shape[1]), "test_pairs": int(self.test[0].shape[1])}


def link_split(data, *, val_frac: float = 0.05, test_frac: float = 0.1,
               seed: int = 0) -> LinkSplit:
    """Hold out ``val_frac`` and ``test_frac`` of the undirected edges (and as many uniform
    non-edges each) and return the graph without them.

    Raises:
        InvalidParameterError: bad fractions, or too few edges to hold any out.
    """
    from gnnprivacy.datasets.link_splits import sample_non_edges, undirected_edges

    check_probability("val_frac", val_frac, allow_one=False)
    check_probability("test_frac", test_frac, allow_zero=False, allow_one=False)
    if val_frac + test_frac >= 1:
        raise InvalidParameterError("val_frac + test_frac", "< 1", val_frac + test_frac)
    n = int(data.num_nodes)
    edges = undirected_edges(data.edge_index.cpu().numpy(), n)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 4646]))
    perm = rng.permutation(len(edges))
    n_test, n_val = round(test_frac * len(edges)), round(val_frac * len(edges))
    if n_test < 1 or len(edges) - n_test - n_val < 1:
        raise InvalidParameterError("data", "a graph with enough edges to hold some out",
                                    f"{len(edges)} edges")
    test_pos, val_pos = edges[perm[:n_test]], edges[perm[n_test:n_test + n_val]]
    train = edges[perm[n_test + n_val:]]
    test_neg = sample_non_edges(n, n_test, edges, generator=rng)
    val_neg = sample_non_edges(n, n_val, edges, generator=rng, exclude=test_neg)
    ei = torch.from_numpy(np.concatenate([train, train[:, ::-1]]).T.copy())
    graph = Data(x=data.x, y=getattr(data, "y", None), edge_index=ei, num_nodes=n)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a.T)).long()  # noqa: E731
    return LinkSplit(graph, (t(val_pos), t(val_neg)), (t(test_pos), t(test_neg)), int(seed))


class LinkSubgraphs(SubgraphSampler):
    """A star sampler's batches with each centre's link pairs (see the module docstring).

    Args:
        inner: an `EdgeSubgraphs` or `DegreeBoundedSubgraphs` of one hop.
        negatives: negative nodes per centre.
        pool: ``"all"`` (edge level: every node) or ``"public"`` (node level: the
            non-training nodes).

    The batch gains ``link_label``, one per row: the pair (the row's centre, the row) is a
    positive (1: a neighbour in the star), a negative (0: an appended edge-less row) or no
    pair (-1: the centre). Everything the loss reads is then one value per row, in the
    rows' own subgraph (`pair_loss`).
    Privacy: the inner sampler's (its event, scope and unit); the negative rows are drawn
    independently of the data from a pool whose nodes are not privacy units.
    """

    def __init__(self, inner: SubgraphSampler, *, negatives: int = 4, pool: str = "all"):
        self.inner = inner
        self.negatives = check_int("negatives", negatives, low=1)
        self.pool = check_choice("pool", pool, ("all", "public"))
        self.name = f"{inner.name}+link"

    def setup(self, data, *, model=None, generator=None) -> None:
        self.inner.setup(data, model=model, generator=generator)
        if getattr(self.inner, "hops_", 1) != 1:
            raise InvalidParameterError("hops", "1 for link prediction (star subgraphs)",
                                        self.inner.hops_)
        for key in ("graph", "train_nodes", "num_train", "num_nodes"):
            setattr(self, key, getattr(self.inner, key))
        if hasattr(self.inner, "num_units"):
            self.num_units = self.inner.num_units
        self._pool = (torch.arange(self.num_nodes) if self.pool == "all"
                      else (~self.graph.train_mask).nonzero().flatten())
        if self._pool.numel() == 0:
            raise InvalidParameterError("pool", "at least one public (non-training) node for "
                                        "the negatives", "none")

    def __getattr__(self, name):            # the inner sampler's options and results
        inner = self.__dict__.get("inner")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)

    def plan(self, *, batch_size: int | None) -> SamplerPlan:
        return self.inner.plan(batch_size=batch_size)

    def default_steps(self, plan, *, epsilon, delta):
        return self.inner.default_steps(plan, epsilon=epsilon, delta=delta)

    def steps_for_epochs(self, plan, epochs):
        return self.inner.steps_for_epochs(plan, epochs)

    def stream_state(self):
        return self.inner.stream_state()

    def load_stream_state(self, state) -> None:
        self.inner.load_stream_state(state)

    def sample(self, generator: torch.Generator) -> Data:
        batch = self.inner.sample(generator)
        return self.with_pairs(batch, generator)

    def with_pairs(self, batch: Data, generator: torch.Generator) -> Data:
        """``batch`` with ``negatives`` edge-less pool rows per subgraph and the pairs."""
        num, n = int(batch.num_subgraphs), self.num_nodes
        if num == 0:
            return batch
        draws = self._pool[torch.randint(0, self._pool.numel(), (num, self.negatives),
                                         generator=generator)]
        old_keys = batch.batch * n + batch.n_id
        neg_keys = torch.unique((torch.arange(num).unsqueeze(1) * n + draws).flatten())
        neg_keys = neg_keys[~torch.isin(neg_keys, old_keys)]
        nodes = torch.cat([batch.n_id, neg_keys % n])
        seg = torch.cat([batch.batch, neg_keys // n])
        order = torch.argsort(seg, stable=True)
        where = torch.empty_like(order)
        where[order] = torch.arange(order.numel())
        centre = where[batch.center]
        # a star: only the entries into the centre (DP-GNN's subgraphs also hold the bounded
        # edges among the neighbours, which would let a positive's row read the centre);
        # dropping entries is a function of the subgraph, so the privacy analysis holds
        is_centre = torch.zeros(int(batch.num_nodes), dtype=torch.bool)
        is_centre[batch.center] = True
        star = is_centre[batch.edge_index[1]] & ~is_centre[batch.edge_index[0]]
        edges = (where[batch.edge_index[0][star]], where[batch.edge_index[1][star]])
        out = self.inner._assemble(nodes[order], seg[order], centre, num, edges)
        label = torch.ones(out.num_nodes, dtype=torch.long)       # a neighbour of the centre
        edgeless = torch.ones(out.num_nodes, dtype=torch.bool)
        edgeless[out.edge_index.flatten()] = False
        label[edgeless] = 0                  # an appended negative (a row with no edge)
        label[out.center] = -1               # the centre itself: no pair
        out.link_label = label
        if self.pool == "public":            # negatives of public nodes: not privacy units
            out.public_rows = label == 0
        return out

    def __repr__(self) -> str:
        return f"LinkSubgraphs({self.inner!r}, negatives={self.negatives}, pool={self.pool!r})"


class LinkEncoder(nn.Module):
    """``Linear -> ReLU -> Linear -> normalise -> SAGEConv(sum) -> embedding``: a one-layer
    encoder whose aggregation the edge-private release covers; its messages are unit rows
    of ``message_channels`` (a small width keeps the release's noise low), so the
    release's clip at 1 changes nothing."""

    def __init__(self, in_channels: int, hidden: int = 64, out_channels: int = 32,
                 message_channels: int = 16):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.lin = nn.Linear(in_channels, hidden)
        self.msg = nn.Linear(hidden, message_channels)
        self.conv = SAGEConv(message_channels, out_channels, aggr="sum")

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = F.normalize(self.msg(torch.relu(self.lin(x))), dim=1)
        return self.conv(h, edge_index)


#: the decoder's scale: a pair's logit is this times the cosine of its two embeddings
SCALE = 5.0


def _cosine(a: Tensor, b: Tensor) -> Tensor:
    return SCALE * F.cosine_similarity(a, b, dim=-1)


def pair_loss(out: Tensor, batch: Data) -> Tensor:
    """Binary cross-entropy of each row's pair (its centre, itself), summed per subgraph and
    averaged over the subgraphs; every tensor is one row per node of the batch. The logit is
    ``SCALE`` times the cosine of the two embeddings (a dot product of normalised rows: the
    sum aggregation's scale with the degree does not enter the score)."""
    centre = out[batch.center][batch.batch]            # each row's own centre
    score = _cosine(centre, out)
    label = batch.link_label
    weight = (label >= 0).to(score.dtype)
    total = F.binary_cross_entropy_with_logits(score, label.clamp(min=0).to(score.dtype),
                                               weight=weight, reduction="sum")
    return total / max(int(batch.num_subgraphs), 1)


def pair_scores(aggregated: Tensor, alone: Tensor, pairs: Tensor) -> Tensor:
    """``(s(v, w) + s(w, v)) / 2`` for the pairs ``(2, P)``, ``s(v, w)`` the scaled cosine of
    ``f(v)`` (aggregated) and ``g(w)`` (edge-less)."""
    v, w = pairs
    return 0.5 * (_cosine(aggregated[v], alone[w]) + _cosine(aggregated[w], alone[v]))


def hits_at_k(pos: Tensor, neg: Tensor, k: int) -> float:
    """Share of positives scored above the ``k``-th best negative (OGB's Hits@K)."""
    if neg.numel() < k:
        return 1.0
    threshold = torch.topk(neg, k).values[-1]
    return float((pos > threshold).double().mean())


def _metrics(aggregated: Tensor, alone: Tensor, split: LinkSplit, ks=(20, 50, 100)) -> dict:
    from sklearn.metrics import roc_auc_score

    out = {}
    for part, (pos, neg) in (("val", split.val), ("test", split.test)):
        if pos.numel() == 0:
            continue
        sp, sn = pair_scores(aggregated, alone, pos), pair_scores(aggregated, alone, neg)
        labels = np.r_[np.ones(sp.numel()), np.zeros(sn.numel())]
        out[f"{part}_auc"] = float(roc_auc_score(labels, torch.cat([sp, sn]).numpy()))
        for k in ks:
            out[f"{part}_hits@{k}"] = hits_at_k(sp, sn, k)
    return out


def _sampler(privacy: str, *, negatives: int, max_degree: int, inference: str):
    from gnnprivacy.training.private import DegreeBoundedSubgraphs, EdgeSubgraphs

    if privacy == "node":
        return LinkSubgraphs(DegreeBoundedSubgraphs(max_degree=max_degree, hops=1,
                                                    sampling="poisson"),
                             negatives=negatives, pool="public")
    return LinkSubgraphs(EdgeSubgraphs(hops=1, inference=inference,
                                       noise_in_training=inference == "noisy"),
                         negatives=negatives, pool="all")


def fit_link_predictor(data, *, privacy: str = "edge", epsilon: float = 8.0,
                       delta: float | None = None, seed: int = 0, steps: int | None = None,
                       batch_size: int | None = None, negatives: int = 4, hidden: int = 64,
                       out_channels: int = 32, lr: float = 0.01, clip_norm: float = 1.0,
                       max_degree: int = 3, inference: str = "noisy",
                       val_frac: float = 0.05, test_frac: float = 0.1,
                       node_train_frac: float = 0.8, split: LinkSplit | None = None,
                       projection: int | None = 256) -> dict:
    """Train ``LinkEncoder`` on a link split of ``data`` and return its metrics and privacy.

    Args:
        privacy: ``"none"`` (the same star batches, plain Adam), ``"edge"`` or ``"node"``.
        node_train_frac: node level: the share of nodes that are private training nodes
            (the others are public and give the negatives).
        inference: edge level: ``"noisy"`` (embeddings from the released aggregates, in the
            epsilon) or ``"unprotected"``.
        projection: features wider than this are first multiplied by a fixed random
            Gaussian matrix to this width (data-independent, so it costs no privacy at any
            level; it keeps a batch of a wide dataset such as Facebook's 4,714 features
            small); ``None``: never.

    Returns:
        ``{"metrics", "epsilon", "delta", "privacy", "ledger", "split", "steps"}``.
    """
    from gnnprivacy.training.private import PrivateTraining

    privacy = check_choice("privacy", privacy, LINK_PRIVACY)
    split = link_split(data, val_frac=val_frac, test_frac=test_frac, seed=seed) \
        if split is None else split
    graph = split.graph.clone()
    n = int(graph.num_nodes)
    gen = torch.Generator().manual_seed(int(seed))
    if projection is not None and graph.num_features > check_int("projection", projection,
                                                                 low=1):
        matrix = torch.randn(graph.num_features, projection, generator=gen)
        graph.x = graph.x.float() @ (matrix / projection ** 0.5)
    mask = torch.ones(n, dtype=torch.bool)
    if privacy == "node":                        # the private units; the rest is public
        mask = torch.rand(n, generator=gen) < check_probability("node_train_frac",
                                                                node_train_frac)
    graph.train_mask = mask
    graph.y = torch.zeros(n, dtype=torch.long) if graph.y is None else graph.y
    torch.manual_seed(int(seed))
    model = LinkEncoder(graph.num_features, hidden, out_channels)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sampler = _sampler(privacy, negatives=negatives, max_degree=max_degree,
                       inference=inference if privacy == "edge" else "none")
    if privacy == "none":        # the same star batches, a plain loop
        sampler.setup(graph, model=model, generator=torch.Generator().manual_seed(seed + 1))
        plan = sampler.plan(batch_size=batch_size)
        planned = steps or sampler.default_steps(plan, epsilon=epsilon, delta=1e-5)
        sample_gen = torch.Generator().manual_seed(seed + 2)
        for _ in range(planned):
            batch = sampler.sample(sample_gen)
            opt.zero_grad()
            pair_loss(model(batch.x, batch.edge_index), batch).backward()
            opt.step()
        pt = None
    else:
        pt = PrivateTraining(model, opt, graph, sampler=sampler, epsilon=epsilon, delta=delta,
                             max_grad_norm=clip_norm, steps=steps, batch_size=batch_size,
                             seed=int(seed))
        for batch in pt.loader:
            opt.zero_grad()
            pair_loss(model(batch.x, batch.edge_index), batch).backward()
            opt.step()
        pt.close()
        planned = pt.steps
    model.eval()
    with torch.no_grad():
        alone = model(graph.x, torch.zeros(2, 0, dtype=torch.long))
        if privacy == "edge" and inference == "noisy":
            aggregated = pt.release_predictor(graph)(graph.x)
        else:
            aggregated = model(graph.x, graph.edge_index)
    metrics = _metrics(aggregated, alone, split)
    if pt is None:
        return {"metrics": metrics, "privacy": {"private": False}, "epsilon": float("inf"),
                "delta": None, "ledger": None, "split": split.sizes(), "steps": int(planned)}
    record = pt.privacy
    # the scores read the held-out edges and non-edges of the private graph (the code
    # audit's publication check moves every edge and sees them change)
    record["unaccounted"] = [*record["unaccounted"],
                             "the link `metrics` (AUC, Hits@K) score the released model on the "
                             "held-out validation and test edges of the private graph, which "
                             "training did not use: outside the epsilon"]
    if privacy == "node":
        record["unaccounted"] = ["inference: the embeddings are computed on the training "
                                 "graph, which reads training nodes (outside the epsilon)",
                                 *record["unaccounted"]]
    return {"metrics": metrics, "privacy": record, "epsilon": float(pt.epsilon),
            "delta": float(pt.delta), "ledger": pt.ledger, "split": split.sizes(),
            "steps": int(planned)}
