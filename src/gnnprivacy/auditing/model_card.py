"""The report card of any node or graph-level model:
``gp.assess(model, data, train_fn=..., privacy=...)``.

What an attacker can learn from a model the user trained in their own loop
(`gnnprivacy.make_private`), from a non-private PyG model they want to release, or from a
built-in method's trainer. The model is any object with ``forward(x, edge_index)`` returning
one row of logits per node (an ``nn.Module``), a `PrivateTraining` (its model), or a library
trainer (``predict_logits``). The card has the layout of the built-in card
(`gnnprivacy.auditing.report_card`), and its model sections are computed by the same
functions (`posterior_sections`) for both:

* **claimed**: ε and δ with unit, relation and scope from ``privacy=`` (a `PrivateTraining`,
  its ``.privacy`` dict with ``epsilon``, a `RunRecord`), or none: a non-private release,
  which the card says;
* **membership inference without retraining**: loss and confidence thresholds calibrated on
  the non-members the user marks (``nonmembers=``, default the test nodes) against the members
  (``members=``, default the training nodes): AUC with a bootstrap interval, the TPR at the
  thresholds that give 1% and 0.1% FPR on a calibration half of the non-members (the FPR they
  realise on the other half beside), and the empirical epsilon lower bound of the loss scores;
* **LiRA** (`gnnprivacy.attacks.lira`) when ``train_fn(data, seed) -> model`` is given:
  ``shadows`` models trained by the user's own function, each on a random half of the
  candidate nodes (``data.train_mask`` set to the half), online and offline, ROC curves and
  TPR at 1% and 0.1% FPR; the released model is also scored against the shadows;
* **code audit** (`gnnprivacy.auditing.code.code_audit`) of one run of ``train_fn`` when it
  trains through `make_private` (the executed noise, clip and sampling rate against the claim);
* **link stealing** on the released posteriors: He et al.'s Attack-0 (unsupervised), with a
  bootstrap interval, and ``auc_vs_nhop``
  (linked pairs against pairs at distance ``n_hop``);
* **utility**: test accuracy of the model on ``data.test_mask``.

**Graph-level models** (graph classification: ``data`` a `GraphSet`, a PyG ``Dataset`` of
graphs or a list of ``Data``; the model ``forward(x, edge_index, batch[, edge_attr])`` with one
row of logits per graph, e.g. trained with ``make_private(sampler="graphs")``) take the same
path with a graph as the unit: the threshold attacks on the member against the marked
non-member graphs, LiRA with ``train_fn(graphs, seed)`` called on random halves of the graphs
(each shadow queried on every graph alone, the game of
`gnnprivacy.attacks.graph_membership`), the code audit of one run of ``train_fn`` on the
member graphs, the empirical bounds, and utility on the non-member graphs. Link stealing does
not apply (one output per graph, no node posteriors): the card says so.

The empirical lower bounds (code audit, membership scores) stand beside the claim; a bound
above the claim is flagged on the card. The bounds from membership scores treat each node as
one trial of the membership game (the one-run view of auditing): an indication, not a proof.

*Privacy*: assessing reads the released model's outputs (and trains shadows on the user's
data); it releases nothing and spends no budget.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from gnnprivacy.auditing.card_progress import stage
from gnnprivacy.errors import InvalidParameterError

__all__ = ["assess_model", "assess_models", "is_model", "claim_of", "model_logits",
           "posterior_sections", "graph_input", "graph_model_logits"]

#: scores of the threshold attacks: higher = member
THRESHOLD_SCORES = ("loss", "confidence")

#: the card's link-stealing line for a graph-level model
GRAPH_LINK_STEALING = ("not applicable: a graph-level model releases one output per graph, "
                       "no per-node posteriors whose similarity could reveal an edge; the unit "
                       "is the whole graph, its edges included")


def _unwrap(model):
    """The predictor behind ``model``: a `PrivateTraining`'s model, else ``model``."""
    if hasattr(model, "engine") and hasattr(model, "model") and hasattr(model, "privacy"):
        return model.model
    return model


def is_model(obj) -> bool:
    obj = _unwrap(obj)
    return isinstance(obj, torch.nn.Module) or hasattr(obj, "predict_logits")


def _expected_features(module: torch.nn.Module) -> int | None:
    """`gnnprivacy.training.predict.expected_features` (the card and predict share it)."""
    from gnnprivacy.training.predict import expected_features

    return expected_features(module)


def model_logits(model, data) -> torch.Tensor:
    """Logits ``[num_nodes, C]`` of ``model`` on the whole graph ``data`` (evaluation mode,
    no gradients; the model's training mode is restored).

    Raises:
        InvalidParameterError: a graph whose feature size is not the model's, a model that
            fails on the graph, or an output that is not one row of logits per node.
    """
    from gnnprivacy.training.predict import node_logits

    model = _unwrap(model)
    n = int(data.num_nodes)
    if isinstance(model, torch.nn.Module):
        want = _expected_features(model)
        if want is not None and int(data.num_features) != want:
            raise InvalidParameterError("data", f"a graph with the model's {want} features "
                                        "per node", f"{int(data.num_features)} features")
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model(data.x, data.edge_index)
        except (RuntimeError, TypeError, IndexError, ValueError) as exc:
            raise InvalidParameterError(
                "model", "a model that runs as model(data.x, data.edge_index) on this graph",
                f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
        finally:
            model.train(was)
    elif hasattr(model, "predict_logits"):
        out = node_logits(model, data)
    else:
        raise InvalidParameterError("model", "a node model: an nn.Module with forward(x, "
                                    "edge_index), a PrivateTraining or a trained gnnprivacy "
                                    "trainer", type(model).__name__)
    return _checked_logits(out, n, "node")


def _checked_logits(out, rows: int, unit: str, per_node: int | None = None) -> torch.Tensor:
    """``out`` as double CPU logits when it has one row of finite logits (2 classes or more)
    per ``unit``; ``per_node``: the node count that names a graph model which does not pool."""
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or int(out.shape[0]) != rows:
        got: Any = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        if per_node is not None and isinstance(out, torch.Tensor) and out.dim() >= 1 \
                and int(out.shape[0]) == per_node:
            got = f"one row per node ({per_node} rows for {rows} graphs: pool with batch=)"
        raise InvalidParameterError("model", f"an output of one row of logits per {unit} "
                                    f"(shape [{rows}, num_classes])", got)
    if out.shape[1] < 2 or not torch.isfinite(out).all():
        raise InvalidParameterError("model", f"finite logits of at least 2 classes per {unit}",
                                    f"shape {tuple(out.shape)}, finite: "
                                    f"{bool(torch.isfinite(out).all())}")
    return out.detach().double().cpu()


# ----------------------------------------------------------------------------- graph-level input
def graph_input(data):
    """``(graphs, default members, default non-members, name)`` when ``data`` is graph-level
    (a `gnnprivacy.datasets.tu_graphs.GraphSet`: its training and test graphs are the
    defaults; a PyG ``Dataset`` of several graphs or a list of ``Data``: no defaults, the
    user marks them), else ``None`` (one graph: the node path)."""
    from torch_geometric.data import Data, Dataset

    if hasattr(data, "graphs") and hasattr(data, "split") and hasattr(data, "subset"):
        return (list(data.graphs), np.array(data.split.train_idx, dtype=np.int64),
                np.array(data.split.test_idx, dtype=np.int64), str(data.name))
    if isinstance(data, Dataset) and len(data) > 1:
        graphs = [data[i] for i in range(len(data))]
        name = getattr(data, "name", None) or type(data).__name__
    elif isinstance(data, (list, tuple)) and data and all(isinstance(g, Data) for g in data):
        graphs, name = list(data), "custom graphs"
    else:
        return None
    return graphs, None, None, str(name)


def _graph_labels(graphs: list) -> torch.Tensor:
    """One class label per graph (``y`` of each graph, its first entry)."""
    ys = [getattr(g, "y", None) for g in graphs]
    missing = [i for i, y in enumerate(ys) if y is None or y.numel() == 0]
    if missing:
        raise InvalidParameterError("graphs", "graphs with a class label y each",
                                    f"{len(missing)} without, e.g. graph {missing[0]}")
    y = torch.cat([t.reshape(-1)[:1] for t in ys])
    if y.is_floating_point() or y.dtype == torch.bool:
        raise InvalidParameterError("graphs", "integer class labels (a graph classifier)",
                                    f"labels of dtype {y.dtype}")
    return y.long()


def graph_model_logits(model, graphs: list) -> torch.Tensor:
    """Logits ``[num_graphs, C]`` of a graph-level ``model`` on ``graphs``, each graph a
    query of its own (``model(x, edge_index, batch[, edge_attr])`` on batches of whole
    graphs, evaluation mode, no gradients: `gnnprivacy.training.graph_classification.
    graph_logits`).

    Raises:
        InvalidParameterError: graphs whose feature size is not the model's (or differ), a
            model that fails on them, or an output that is not one row of logits per graph
            (one row per node: the model does not pool).
    """
    from gnnprivacy.training.graph_classification import graph_logits

    model = _unwrap(model)
    if not isinstance(model, torch.nn.Module):
        raise InvalidParameterError("model", "a graph model: an nn.Module with forward(x, "
                                    "edge_index, batch[, edge_attr]) or a PrivateTraining",
                                    type(model).__name__)
    sizes = sorted({int(g.x.shape[1]) if getattr(g, "x", None) is not None and g.x.dim() == 2
                    else -1 for g in graphs})
    if sizes[0] < 0 or len(sizes) > 1:
        raise InvalidParameterError("graphs", "graphs with node features x of one size",
                                    f"feature sizes {sizes} (-1: no x)")
    want = _expected_features(model)
    if want is not None and sizes[0] != want:
        raise InvalidParameterError("graphs", f"graphs with the model's {want} features per "
                                    "node", f"{sizes[0]} features")
    try:
        out = graph_logits(model, graphs)
    except (RuntimeError, TypeError, IndexError) as exc:
        raise InvalidParameterError(
            "model", "a graph model that runs as model(x, edge_index, batch[, edge_attr]) on "
            "these graphs", f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
    return _checked_logits(out, len(graphs), "graph",
                           per_node=sum(int(g.num_nodes) for g in graphs))


class _NodeInput:
    """The node path: one graph, a row per node; ``train_fn`` gets the graph with
    ``train_mask`` set to its training nodes."""

    unit, query = "node", "full graph"

    def __init__(self, data):
        _check_data(data)
        self.data, self.n, self.y = data, int(data.num_nodes), data.y
        self.name = str(getattr(data, "name", None) or "custom graph")

    def logits(self, model):
        return model_logits(model, self.data)

    def training_input(self, mask: np.ndarray):
        return _shadow_data(self.data, mask)

    def audit_input(self, members: np.ndarray):
        """What the code audit's run of ``train_fn`` gets: the graph as given."""
        return self.data

    def defaults(self, members, nonmembers):
        return (self.data.train_mask if members is None else members,
                self.data.test_mask if nonmembers is None else nonmembers)


class _GraphInput:
    """The graph path: a list of graphs, a row per graph; ``train_fn`` gets the list of its
    training graphs (each queried alone afterwards)."""

    unit, query = "graph", "each graph alone"

    def __init__(self, graphs, members, nonmembers, name):
        if len(graphs) < 4:
            raise InvalidParameterError("graphs", "at least 4 graphs (2 members, 2 "
                                        "non-members)", len(graphs))
        self.graphs, self.n, self.name = graphs, len(graphs), name
        self._members, self._nonmembers = members, nonmembers
        self.y = _graph_labels(graphs)

    def logits(self, model):
        return graph_model_logits(model, self.graphs)

    def training_input(self, mask: np.ndarray) -> list:
        return [g for g, m in zip(self.graphs, mask) if m]

    def audit_input(self, members: np.ndarray) -> list:
        """What the code audit's run of ``train_fn`` gets: the member graphs."""
        return self.training_input(members)

    def defaults(self, members, nonmembers):
        members = self._members if members is None else members
        nonmembers = self._nonmembers if nonmembers is None else nonmembers
        if members is None or nonmembers is None:
            raise InvalidParameterError("members" if members is None else "nonmembers",
                                        "the indices of the training graphs and of graphs "
                                        "never trained on (a list of graphs has no split)",
                                        None)
        return members, nonmembers


def _input_of(data):
    """`_GraphInput` for graph-level ``data`` (`graph_input`), else `_NodeInput`."""
    graphs = graph_input(data)
    return _NodeInput(data) if graphs is None else _GraphInput(*graphs)


# ----------------------------------------------------------------------------- sections
def link_stealing_section(post: np.ndarray, data, *, seed: int = 0, pairs: int = 2000,
                          n_hop: int | None = 2, n_boot: int = 200, attacks=(),
                          known_frac: float | None = None) -> dict:
    """He et al.'s Attack-0 on released posteriors, with a bootstrap interval, and
    ``auc_vs_nhop`` (linked pairs against pairs at distance ``n_hop``; ``None``: skip, it
    pairs every edge of the graph); ``variants``: the attacker-knowledge attacks ``attacks``
    (of 2, 3, 6) on the same pairs
    (`gnnprivacy.attacks.link_stealing.knowledge.knowledge_attacks`, ``known_frac`` of the
    pairs known to 3 and 6; default He et al.'s half)."""
    from gnnprivacy.attacks.link_stealing.he import NodeView, run_he_attack
    from gnnprivacy.attacks.link_stealing.protocols import auc_vs_nhop
    from gnnprivacy.attacks.lira import rank_auc
    from gnnprivacy.attacks.metrics import bootstrap_ci
    from gnnprivacy.datasets.link_splits import PairSet

    rng = np.random.default_rng(seed)
    ei = data.edge_index.numpy()
    und = ei[:, ei[0] < ei[1]]
    pick = rng.choice(und.shape[1], size=min(pairs, und.shape[1]), replace=False)
    pos_u, pos_w = und[0, pick], und[1, pick]
    n = int(data.num_nodes)
    linked = set(map(tuple, und.T.tolist()))
    neg = []
    while len(neg) < pos_u.size:
        a, b = sorted(rng.integers(0, n, size=2).tolist())
        if a != b and (a, b) not in linked:
            neg.append((a, b))
    neg = np.asarray(neg)
    ps = PairSet(np.concatenate([pos_u, neg[:, 0]]), np.concatenate([pos_w, neg[:, 1]]),
                 np.concatenate([np.ones(pos_u.size, int), np.zeros(len(neg), int)]))
    stage(f"link stealing: He et al. Attack-0 on {len(ps)} node pairs")
    outcome = run_he_attack(0, NodeView(target=post), ps, seed=seed)
    m = outcome.metrics
    ci = bootstrap_ci(outcome.scores, outcome.labels, n_boot=n_boot, metric=rank_auc,
                      generator=np.random.default_rng(seed))
    out = {"attack": "He et al. Attack-0 (posterior correlation distance)",
           "auc": m["auc"], "tpr_at_1pct_fpr": m["tpr_at_1pct_fpr"], "pairs": int(len(ps)),
           "auc_ci95": [ci["low"], ci["high"]]}
    if n_hop is not None:
        stage(f"link stealing: linked pairs against pairs {n_hop} hops apart")
        nh = auc_vs_nhop(post, ei, n, n_hop, metric="correlation", seed=seed)
        out.update(auc_vs_nhop=nh["auc_vs_nhop"], n_hop=n_hop,
                   nhop_pairs=int(nh["nhop_pairs"]))
    if attacks:
        from gnnprivacy.attacks.link_stealing.knowledge import knowledge_attacks

        kw = {} if known_frac is None else {"known_frac": known_frac}
        stage("link stealing: He et al. Attack-" + ", ".join(str(a) for a in attacks)
              + " (the attacker knows node features or part of the graph; each trains a "
              "classifier on pairs)")
        out["variants"] = knowledge_attacks(post, data, ps, attacks=tuple(attacks), seed=seed,
                                            n_boot=n_boot, **kw)
    return out


def _calibrated(member: np.ndarray, nonmember: np.ndarray, *, seed: int, n_boot: int) -> dict:
    """AUC (with interval) and the TPR at thresholds set on a calibration half of the
    non-members for 1% and 0.1% FPR, with the FPR realised on the other half."""
    from gnnprivacy.attacks.lira import summarise_scores

    scores = np.concatenate([member, nonmember])
    labels = np.r_[np.ones(member.size, int), np.zeros(nonmember.size, int)]
    full = summarise_scores(scores, labels, seed=seed, n_boot=n_boot)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(nonmember.size)
    cal, held = nonmember[perm[: nonmember.size // 2]], nonmember[perm[nonmember.size // 2:]]
    out = {"auc": full["auc"], "auc_ci95": full["auc_ci95"], "roc": full["roc"],
           "members": int(member.size), "nonmembers": int(nonmember.size)}
    for key, fpr in (("1pct", 0.01), ("0.1pct", 0.001)):
        thr = float(np.quantile(cal, 1.0 - fpr, method="higher"))
        out[f"tpr_at_{key}_fpr"] = float((member > thr).mean())
        out[f"fpr_at_{key}_threshold"] = float((held > thr).mean())
    return out


def membership_sections(logits: torch.Tensor, y: torch.Tensor, members, nonmembers, *,
                        seed: int = 0, n_boot: int = 200, unit: str = "node") -> dict:
    """The loss and confidence threshold attacks (no retraining), members against the
    marked non-members (``unit``: what a row is, node or graph)."""
    loss = torch.nn.functional.cross_entropy(logits, y, reduction="none").numpy()
    conf = torch.softmax(logits, 1).max(1).values.numpy()
    m, nm = _member_masks(members, nonmembers, y.numel(), unit)
    out = {}
    for name, score in (("loss_threshold", -loss), ("confidence_threshold", conf)):
        out[name] = _calibrated(score[m], score[nm], seed=seed, n_boot=n_boot)
    return out


def posterior_sections(model, data, *, members=None, nonmembers=None, seed: int = 0,
                       link_stealing: bool = True, n_hop: int | None = 2, link_attacks=(),
                       known_frac: float | None = None) -> dict:
    """The sections of a card computed from the released model's outputs on ``data`` alone
    (shared by `assess_model` and the built-in card of a record): ``membership`` (threshold
    attacks), ``link_stealing`` (with the attacker-knowledge ``link_attacks``) and
    ``utility``; ``logits`` as well, for the callers."""
    stage("the model's predictions on the whole graph")
    logits = model_logits(model, data)
    members = data.train_mask if members is None else members
    nonmembers = data.test_mask if nonmembers is None else nonmembers
    stage("membership: loss and confidence thresholds, members against non-members")
    out: dict[str, Any] = {"logits": logits, "membership": membership_sections(
        logits, data.y, members, nonmembers, seed=seed)}
    if link_stealing:
        post = torch.softmax(logits, 1).numpy()
        out["link_stealing"] = link_stealing_section(post, data, seed=seed, n_hop=n_hop,
                                                     attacks=link_attacks, known_frac=known_frac)
    test = _mask(data.test_mask, int(data.num_nodes), "data.test_mask")
    out["test_accuracy"] = float((logits.argmax(1) == data.y)[test].double().mean()) \
        if test.any() else None
    return out


def _mask(value, n: int, name: str, unit: str = "node") -> np.ndarray:
    """A node (graph) set, a boolean mask or ids, as a boolean numpy mask of length ``n``."""
    t = torch.as_tensor(value)
    if t.dtype == torch.bool:
        if t.numel() != n:
            raise InvalidParameterError(name, f"a boolean mask of {n} {unit}s or {unit} ids",
                                        f"a mask of {t.numel()}")
        mask = t.numpy().copy()
    else:
        ids = t.long().reshape(-1)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
            bad = ids[(ids < 0) | (ids >= n)]
            raise InvalidParameterError(name, f"{unit} ids in [0, {n})",
                                        f"ids out of range ({bad.numel()}, e.g. {int(bad[0])})")
        mask = np.zeros(n, dtype=bool)
        mask[ids.numpy()] = True
    if mask.sum() < 2:
        raise InvalidParameterError(name, f"at least 2 {unit}s", int(mask.sum()))
    return mask


def _member_masks(members, nonmembers, n: int, unit: str = "node"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The members and the marked non-members as boolean masks; a unit in both is refused
    (it cannot be scored as both)."""
    m, nm = _mask(members, n, "members", unit), _mask(nonmembers, n, "nonmembers", unit)
    both = np.flatnonzero(m & nm)
    if both.size:
        raise InvalidParameterError("nonmembers", f"{unit}s disjoint from the members",
                                    f"{both.size} {unit}(s) in both, e.g. {int(both[0])}")
    return m, nm


# ----------------------------------------------------------------------------- the claim
def claim_of(privacy) -> dict:
    """The claimed section of a card from ``privacy``: a `PrivateTraining`, a dict (its
    ``.privacy`` with ``epsilon`` added, or a record's ``privacy`` with ``epsilon``/
    ``delta``), a `RunRecord` or ``None`` (not private)."""
    if privacy is None:
        return {"epsilon": math.inf, "delta": None, "unit": None, "relation": None,
                "scope": "none: no differential privacy claimed, the card shows what a "
                         "release without DP leaks", "accounting_mode": None,
                "accountant": None, "unaccounted": []}
    epsilon = delta = None
    if hasattr(privacy, "engine") and hasattr(privacy, "privacy"):         # PrivateTraining
        epsilon, delta, p = float(privacy.epsilon), privacy.delta, privacy.privacy
    elif hasattr(privacy, "epsilon") and hasattr(privacy, "privacy"):      # RunRecord
        epsilon, delta, p = float(privacy.epsilon), privacy.delta, privacy.privacy or {}
    elif isinstance(privacy, dict):
        p = privacy
        epsilon, delta = p.get("epsilon"), p.get("delta")
    else:
        raise InvalidParameterError("privacy", "a PrivateTraining, its .privacy dict with "
                                    "'epsilon', a RunRecord or None", type(privacy).__name__)
    if epsilon is None:
        raise InvalidParameterError("privacy", "the claimed 'epsilon' (and 'delta')",
                                    sorted(p))
    epsilon = float(epsilon)
    return {"epsilon": epsilon, "delta": None if delta is None else float(delta),
            "unit": p.get("unit"), "relation": p.get("relation"),
            "scope": p.get("scope") or ("the released model" if math.isfinite(epsilon)
                                        else None),
            "accounting_mode": p.get("accounting_mode") or p.get("eps_mode"),
            "accountant": p.get("accountant"), "unaccounted": list(p.get("unaccounted", []))}


# ----------------------------------------------------------------------------- shadows
def _call_train_fn(train_fn, data, seed: int):
    out = train_fn(data, seed)
    if not is_model(out):
        raise InvalidParameterError(
            "train_fn", "a function train_fn(data, seed) returning the trained model (an "
            "nn.Module, or the PrivateTraining)", f"a function returning {type(out).__name__}")
    return out


def _shadow_data(data, mask: np.ndarray):
    d = data.clone()
    d.train_mask = torch.from_numpy(mask.copy())
    d.val_mask = torch.zeros_like(d.train_mask)
    d.test_mask = ~d.train_mask
    return d


def lira_section(train_fn, data, target_logits, pool: np.ndarray, target_members: np.ndarray,
                 *, shadows: int, seed: int, fixed_variance: bool = True, progress=None
                 ) -> dict:
    """Train ``shadows`` models with ``train_fn`` on random halves of ``pool`` and run LiRA
    (online, offline, and the released model scored against all shadows): the sections, and
    the released model's ``(member, non-member)`` scores (``None`` without both).

    ``data``: the graph of a node model, or graph-level input (`graph_input`: each shadow
    is trained on its half of the graphs, as a list, and queried on every graph alone)."""
    from gnnprivacy._validation import check_int
    from gnnprivacy.attacks.lira import (half_memberships, lira_attack, lira_scores,
                                         logit_confidence, summarise_scores)

    k = check_int("shadows", shadows, low=4)
    inp = data if isinstance(data, (_NodeInput, _GraphInput)) else _input_of(data)
    pool_ids = np.flatnonzero(pool)
    mem = half_memberships(k, pool_ids, inp.n, generator=np.random.default_rng(seed))
    phi = []
    for j in range(k):
        model = _call_train_fn(train_fn, inp.training_input(mem[j]), seed * 1_000_003 + j)
        phi.append(logit_confidence(inp.logits(model), inp.y))
        if progress is not None:
            progress(j)
    phi = np.stack(phi)
    out = {}
    for variant in ("online", "offline"):
        out[f"lira_{variant}"] = {**lira_attack(phi, mem, variant=variant, pool=pool_ids,
                                                fixed_variance=fixed_variance, seed=seed),
                                  "query": inp.query, "game": "train_fn on random halves"}
    x = logit_confidence(target_logits, inp.y)
    s = lira_scores(x, phi, mem, variant="online", fixed_variance=fixed_variance)[pool_ids]
    lab = target_members[pool_ids]
    ok = np.isfinite(s)
    scores = None
    if 0 < lab[ok].sum() < ok.sum():
        out["lira_released_model"] = {**summarise_scores(s[ok], lab[ok], seed=seed),
                                      "variant": "online", "shadows": k}
        scores = (s[ok][lab[ok]], s[ok][~lab[ok]])
    return out, scores


def _code_audit(train_fn, data, seed: int, claimed: dict) -> dict:
    from gnnprivacy.auditing.code import code_audit

    def train():
        out = _call_train_fn(train_fn, data, seed)
        if hasattr(out, "engine") and hasattr(out, "privacy"):
            return {"epsilon": float(out.epsilon), "delta": float(out.delta)}
        return None

    eps, delta = claimed["epsilon"], claimed["delta"]
    kw = {} if eps is None or not math.isfinite(eps) else {"epsilon_claimed": eps,
                                                           "delta": delta}
    try:
        res = code_audit(train, seed=seed, **kw)
    except InvalidParameterError as exc:
        if exc.name != "train" or "no engine observed" not in str(exc):
            raise
        return {"note": "train_fn does not train through make_private: no code audit"}
    except KeyError:            # neither the claim nor a PrivateTraining to read it from
        raise InvalidParameterError("privacy", "the claimed epsilon and delta (train_fn "
                                    "returns the model, not its PrivateTraining)",
                                    None) from None
    return {k: res.to_dict()[k] for k in ("mode", "epsilon_claimed", "epsilon_lower_bound",
                                           "epsilon_estimate_gdp", "runs", "confidence",
                                           "violation")}


def _empirical(card: dict, scores_of: dict, *, delta: float | None, seed: int,
               unit: str = "node") -> None:
    """Empirical epsilon lower bounds from membership scores (heuristic, see the module)."""
    from gnnprivacy.auditing.bounds import empirical_epsilon

    d = delta if delta is not None else 1e-5
    claim = card["claimed"]["epsilon"]
    out = {}
    for name, (member, nonmember) in scores_of.items():
        if member.size < 4 or nonmember.size < 4:
            continue
        r = empirical_epsilon(member, nonmember, delta=d, selection="split",
                              generator=np.random.default_rng(seed))
        out[name] = {"epsilon_lower_bound": r["epsilon_lower_bound"], "delta": d,
                     "confidence": r["confidence"], "runs": r["runs"], "unit": unit,
                     "exceeds_claim": bool(r["epsilon_lower_bound"] > claim)}
    if out:
        card["empirical"] = out


# ----------------------------------------------------------------------------- the card
def _check_data(data) -> None:
    from torch_geometric.data import Data

    if not isinstance(data, Data):
        raise InvalidParameterError("data", "a torch_geometric.data.Data", type(data).__name__)
    for attr in ("x", "y", "edge_index", "train_mask", "test_mask"):
        if getattr(data, attr, None) is None:
            raise InvalidParameterError("data", f"a graph with {attr}", "none")


def _link_attacks(value) -> tuple[int, ...]:
    """The attacker-knowledge variants asked for, checked before anything trains (Attack-0
    always runs; naming it is allowed)."""
    try:
        attacks = tuple(int(a) for a in value)
    except (TypeError, ValueError):
        attacks = None
    if attacks is None or any(a not in (0, 2, 3, 6) for a in attacks):
        raise InvalidParameterError("link_attacks", "He et al.'s attacks that apply to one "
                                    "released model, a subset of (0, 2, 3, 6) (1, 4, 5, 7 need "
                                    "a shadow dataset)", value)
    return tuple(sorted(set(attacks) - {0}))


def assess_model(model, data, *, train_fn=None, privacy=None, members=None, nonmembers=None,
                 shadows: int = 8, code_audit: bool = True, link_stealing: bool = True,
                 n_hop: int | None = 2, link_attacks=(2, 3, 6), known_frac: float | None = None,
                 fixed_variance: bool = True, seed: int = 0, name: str | None = None,
                 progress=None) -> dict[str, Any]:
    """The report card of ``model`` released on ``data`` (see the module docstring).

    Args:
        model: an ``nn.Module`` with ``forward(x, edge_index)`` giving one row of logits per
            node, a `PrivateTraining`, or a trained gnnprivacy trainer; for graph-level
            ``data``, an ``nn.Module`` with ``forward(x, edge_index, batch[, edge_attr])``
            giving one row of logits per graph (or its `PrivateTraining`).
        data: the PyG graph it was trained on (``x``, ``y``, ``edge_index``, ``train_mask``,
            ``test_mask``); or graph-level input (`graph_input`): a `GraphSet`
            (`gnnprivacy.datasets.load_graph_dataset`), a PyG ``Dataset`` of graphs or a list
            of ``Data``, each with its class label ``y``.
        train_fn: ``train_fn(data, seed) -> model`` (or its `PrivateTraining`), training on
            ``data.train_mask``; for graphs ``train_fn(graphs, seed)``, training on the list
            it gets: LiRA's shadows and the code audit run it.
        privacy: the claim (`claim_of`); default the `PrivateTraining` passed as ``model``,
            else none (a non-private release).
        members, nonmembers: node (graph) masks or ids, disjoint (default the training and
            the test nodes; a `GraphSet`'s training and test graphs; a list of graphs has
            no default).
        shadows: LiRA's shadow models (``>= 4``, ``0``: no LiRA; only with ``train_fn``).
        code_audit: audit one run of ``train_fn`` with canaries (when it uses make_private).
        link_stealing, n_hop: the link-stealing section and the distance of its n-hop pairs
            (graph-level models: the card says it does not apply).
        link_attacks: He et al.'s attacker-knowledge variants beside Attack-0, of 2 (node
            features), 3 (part of the graph), 6 (both); ``()``: Attack-0 only (see
            `gnnprivacy.attacks.link_stealing.knowledge`).
        known_frac: the share of the tested pairs known to attacks 3 and 6 (default He et
            al.'s half); they are tested on the rest.
        fixed_variance: LiRA's global variances (advised for few shadows).
        seed: seeds the attacks' draws and the shadows (shadow ``j`` gets
            ``seed * 1000003 + j``).
        name: the model's name on the card (default: its class name).
        progress: optional callable(j) after each shadow.
    """
    inp = _input_of(data)
    if train_fn is not None and not callable(train_fn):
        raise InvalidParameterError("train_fn", "a function train_fn(data, seed) -> model",
                                    type(train_fn).__name__)
    link_attacks = _link_attacks(link_attacks)
    if privacy is None and hasattr(model, "engine") and hasattr(model, "privacy"):
        privacy = model
    claimed = claim_of(privacy)
    label = name or type(_unwrap(model)).__name__
    cls = type(_unwrap(model))
    card: dict[str, Any] = {"run_id": label, "method": label, "dataset": inp.name,
                            "claimed": claimed,
                            "subject": {"kind": "model", "named": name is not None,
                                        "class": f"{cls.__module__}.{cls.__qualname__}"}}
    if inp.unit == "graph":
        logits = inp.logits(model)
        m, nm = _member_masks(*inp.defaults(members, nonmembers), inp.n, "graph")
        hits = (logits.argmax(1) == inp.y).double()
        card.update(level="graph", membership=membership_sections(
            logits, inp.y, m, nm, seed=seed, unit="graph"),
            utility={"test_accuracy": float(hits[torch.from_numpy(nm)].mean()),
                     "measured_on": "the non-member graphs"},
            link_stealing={"applicable": False, "note": GRAPH_LINK_STEALING})
    else:
        sec = posterior_sections(model, data, members=members, nonmembers=nonmembers,
                                 seed=seed, link_stealing=link_stealing, n_hop=n_hop,
                                 link_attacks=link_attacks, known_frac=known_frac)
        logits = sec["logits"]
        card.update(membership=sec["membership"],
                    utility={"test_accuracy": sec["test_accuracy"]})
        if "link_stealing" in sec:
            card["link_stealing"] = {**sec["link_stealing"], "model": "the released posteriors"}
        m, nm = _member_masks(*inp.defaults(members, nonmembers), inp.n)
    loss = -torch.nn.functional.cross_entropy(logits, inp.y, reduction="none").numpy()
    scores_of = {"loss_threshold": (loss[m], loss[nm])}
    if train_fn is not None and shadows:
        stage(f"membership: LiRA, training {shadows} shadow models with train_fn")
        lira, released = lira_section(train_fn, inp, logits, m | nm, m,
                                      shadows=shadows, seed=seed,
                                      fixed_variance=fixed_variance, progress=progress)
        card["membership"].update(lira)
        if released is not None:
            scores_of["lira_released_model"] = released
    if train_fn is not None and code_audit:
        stage("code audit: one run of train_fn with gradient canaries")
        audit = _code_audit(train_fn, inp.audit_input(m), seed, claimed)
        card["audit" if "mode" in audit else "code_audit"] = audit
    _empirical(card, scores_of, delta=claimed["delta"], seed=seed, unit=inp.unit)
    return card


# ----------------------------------------------------------------------------- several models
def _model_entries(models) -> list[tuple[str, Any, Any, Any]]:
    """``[(name, model, privacy, train_fn)]`` from a list of models or a dict ``name ->
    model`` or ``name -> {"model": ..., "privacy": ..., "train_fn": ...}``."""
    if isinstance(models, dict):
        items = list(models.items())
    elif isinstance(models, (list, tuple)):
        items = [(None, m) for m in models]
    else:
        raise InvalidParameterError("models", "a list of models or a dict name -> model",
                                    type(models).__name__)
    if not items:
        raise InvalidParameterError("models", "at least one model", "an empty "
                                    + type(models).__name__)
    entries, seen = [], {}
    for i, (name, value) in enumerate(items):
        spec = dict(value) if isinstance(value, dict) else {"model": value}
        unknown = sorted(set(spec) - {"model", "privacy", "train_fn"})
        if unknown or "model" not in spec:
            raise InvalidParameterError(f"models[{name if name is not None else i}]",
                                        "a model, or a dict with 'model' and optionally "
                                        "'privacy' and 'train_fn'", sorted(spec))
        model = spec["model"]
        if not is_model(model):
            raise InvalidParameterError(f"models[{name if name is not None else i}]",
                                        "a node model: an nn.Module with forward(x, "
                                        "edge_index), a PrivateTraining or a trained gnnprivacy "
                                        "trainer", type(model).__name__)
        label = str(name) if name is not None else type(_unwrap(model)).__name__
        seen[label] = seen.get(label, 0) + 1
        entries.append([label, model, spec.get("privacy"), spec.get("train_fn")])
    counts: dict[str, int] = {}
    for entry in entries:                   # two models of one class: Net #1, Net #2
        if seen[entry[0]] > 1:
            counts[entry[0]] = counts.get(entry[0], 0) + 1
            entry[0] = f"{entry[0]} #{counts[entry[0]]}"
    return [tuple(e) for e in entries]


def assess_models(models, data, **options) -> dict[str, Any]:
    """One report card for several models released on the same graph ``data``: each model's
    card (`assess_model`, the same options for all) and a comparison (render it with
    `gnnprivacy.auditing.report_card.card_to_markdown` / ``card_to_html``: a table with every
    attack's AUC, the membership ROC curves of the models overlaid and the AUCs against the
    claimed epsilon, the models without DP at the right end).

    Args:
        models: a list of models (named by class), or a dict ``name -> model`` or ``name ->
            {"model": ..., "privacy": ..., "train_fn": ...}``: each model with its own claim
            (default: its `PrivateTraining`'s, else none) and ``train_fn`` (LiRA, code audit).
        data: the graph every model was trained on (or graph-level input, `graph_input`).
        options: `assess_model`'s options other than ``privacy``, ``train_fn`` and ``name``.

    Returns:
        ``{"dataset": ..., "cards": [card, ...]}`` in the order given.

    Raises:
        InvalidParameterError: no models, ``privacy`` / ``train_fn`` / ``name`` given for
            all (each model states its own), or a model that does not run on ``data`` (named;
            checked for every model before anything trains).
    """
    for key in ("privacy", "train_fn", "name"):
        if key in options:
            raise InvalidParameterError(key, "given per model with several models (models="
                                        "{name: {'model': m, 'privacy': ..., 'train_fn': "
                                        "...}})", f"{key}= for all {len(models)} models"
                                        if hasattr(models, "__len__") else key)
    entries = _model_entries(models)
    inp = _input_of(data)
    want = int(inp.graphs[0].x.shape[1]) if inp.unit == "graph" else int(data.num_features)
    for name, model, _, _ in entries:       # every model runs on this input, before training
        inner = _unwrap(model)
        size = _expected_features(inner) if isinstance(inner, torch.nn.Module) else None
        if size is not None and size != want:
            where = "graph" if inp.unit == "node" else "set of graphs"
            raise InvalidParameterError("models", f"models of one {where}, each taking its "
                                        f"{want} features per node", f"{name!r} takes {size}")
        try:
            inp.logits(model)
        except InvalidParameterError as exc:
            raise InvalidParameterError(exc.name, exc.expected, exc.received,
                                        where=f"model {name!r}") from None
    cards = [assess_model(model, data, privacy=privacy, train_fn=train_fn, name=name, **options)
             for name, model, privacy, train_fn in entries]
    return {"dataset": cards[0]["dataset"], "cards": cards}
