"""Node membership inference: LiRA, the shadow-model attack, and the white-box gradient attack.

Membership games (``game=``):

* ``"induced"`` (default for every method with a trainer; node level, add/remove, the
  relation of the node-DP methods): a pool of nodes; model ``k`` is trained on the subgraph
  induced by its member set ``IN_k`` (non-members are absent from training entirely:
  features, label and edges).
* ``"labels"`` (transductive; default and only game of the local-DP methods ``rgnn``,
  ``lpgnn``, ``ldp-naive``, which train on the whole public graph): every node is in the
  graph and sends its (locally randomised) feature report; the members are the labelled
  users (a random third of them validation, the rest training, the 50/25 proportions of the
  paper's split), whose label reports enter training; non-members report no label. Scores
  come from the method's own transductive predictions.

Each node is IN for exactly half of the ``K`` models. After training, every model is queried
(``queries=``, an explicit choice of the attacker, never dependent on membership):

* ``"full"`` (default): the full graph with the method's own inference (HeterPoisson's private
  inference sees the members as training nodes and aggregates only non-members);
* ``"0hop"``: each node alone, its own features without any edge (the 0-hop query of Olatunji
  et al., *Membership Inference Attack on Graph Neural Networks*, TPS 2021). A member was
  trained inside its member-induced neighbourhood; on the full graph, non-member neighbours
  it never saw smooth its output, which hides what the model memorised about the node's own
  features. Not available in the ``"labels"`` game of the local-DP methods (their
  predictions are transductive).

* `lira` (Carlini et al., *Membership Inference Attacks From First Principles*,
  S&P 2022, online variant): for a target model, each node's logit-scaled confidence
  ``φ = ln p_y − ln(1 − p_y)`` is compared with Gaussians fitted to ``φ`` under the other
  models where the node was IN and OUT (global variance by default, as advised for few
  shadows; ``fixed_variance=False``: per-node variances); score = log-likelihood ratio.
  With several queries the per-query log-likelihood ratios are summed (as LiRA does over
  augmented queries). Every model serves as a target in turn.
* `shadow_attack` (Shokri et al., S&P 2017): a classifier on the sorted posterior
  vectors of the shadow models (labels: IN/OUT) applied to the target's posteriors.
* `gnnprivacy.auditing.gradient_observation.gradient_observation_attack` (spec 000 §3.7):
  the white-box adversary of the canary audit, whose Neyman-Pearson statistic over all noisy
  gradients is the score; it lives with the audits, whose plans and simulator it runs.

Metrics: `gnnprivacy.attacks.metrics.attack_metrics` (raw AUC, accuracy, TPR at 1%
and 0.1% FPR) and a bootstrap CI of the AUC.

Privacy: the attacks read only released model outputs (or, for the gradient attack, the
simulated noisy gradients); they spend no budget. The AUC of a method with a sound
epsilon is bounded by its guarantee only in the game whose relation the guarantee covers
(``"induced"``: node add/remove; ``"labels"``: a user's reports).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gnnprivacy._validation import check_choice, check_int
from gnnprivacy.attacks.metrics import attack_metrics, bootstrap_ci
from gnnprivacy.errors import InvalidParameterError

__all__ = ["MembershipGame", "train_membership_models", "lira", "shadow_attack",
           "run_membership", "balanced_memberships",
           "parse_queries", "QUERIES", "GAMES", "TRANSDUCTIVE_METHODS"]

#: Query graphs of the trained models (see the module docstring).
QUERIES = ("full", "0hop")
#: Membership games (see the module docstring).
GAMES = ("induced", "labels")
#: Methods trained transductively on the whole public graph (local DP): ``"labels"`` game only.
TRANSDUCTIVE_METHODS = ("rgnn", "lpgnn", "ldp-naive")


def parse_queries(query) -> tuple[str, ...]:
    """``"full"``, ``"0hop"``, ``"full+0hop"`` or a sequence of names -> a tuple of names."""
    names = tuple(query.split("+")) if isinstance(query, str) else tuple(query)
    if not names or len(set(names)) != len(names):
        raise InvalidParameterError("query", f"distinct names from {list(QUERIES)} joined by "
                                    "'+'", query)
    for name in names:
        check_choice("query", name, QUERIES)
    return names


def balanced_memberships(num_models: int, num_nodes: int, *, generator: np.random.Generator
                         ) -> np.ndarray:
    """``(K, n)`` boolean matrix: each node IN for exactly ``K // 2`` models (random)."""
    k = check_int("num_models", num_models, low=2)
    ranks = np.argsort(generator.random((k, num_nodes)), axis=0)
    return ranks < k // 2


def _induced(data, mask: torch.Tensor):
    """The training graph of one model: the subgraph induced by ``mask``, all nodes training."""
    from torch_geometric.data import Data
    from torch_geometric.utils import subgraph

    idx = mask.nonzero().flatten()
    ei, _ = subgraph(idx, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)
    n = int(idx.numel())
    sub = Data(x=data.x[idx], y=data.y[idx], edge_index=ei, num_nodes=n)
    sub.train_mask = torch.ones(n, dtype=torch.bool)
    sub.val_mask = torch.zeros(n, dtype=torch.bool)
    sub.test_mask = torch.zeros(n, dtype=torch.bool)
    sub.num_classes = int(getattr(data, "num_classes", int(data.y.max()) + 1))
    return sub


def _query(data, mask: torch.Tensor, kind: str = "full"):
    """The graph a model is queried on: the full graph (``"full"``) or every node alone
    (``"0hop"``: no edges); members marked as training nodes (the method's inference)."""
    q = data.clone()
    q.train_mask = mask.clone()
    q.test_mask = ~mask
    q.val_mask = torch.zeros_like(mask)
    if kind == "0hop":
        q.edge_index = torch.empty((2, 0), dtype=torch.long)
    return q


def _phi(logits: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Logit-scaled confidence ``ln p_y − ln(1 − p_y)`` (stable: logit_y − logsumexp others)."""
    logits = logits.double()
    true = logits.gather(1, y.view(-1, 1)).squeeze(1)
    other = logits.clone()
    other.scatter_(1, y.view(-1, 1), -math.inf)
    return (true - torch.logsumexp(other, dim=1)).numpy()


@dataclass
class MembershipGame:
    """``K`` trained models with their member sets and their outputs on every node.

    ``phi`` and ``posteriors`` belong to the first query (``query``); ``extra_phi`` holds
    ``φ`` of the further queries by name. ``utility``: each model's accuracy on its
    non-members under the full-graph query (the method's own inference).
    """

    method: str
    memberships: np.ndarray          #: (K, n) bool
    phi: np.ndarray                  #: (K, n) logit-scaled confidence of the true label
    posteriors: np.ndarray           #: (K, n, C) softmax outputs
    claimed_epsilon: float
    utility: list = field(default_factory=list)
    seconds: float = 0.0
    query: str = "full"
    extra_phi: dict = field(default_factory=dict)
    game: str = "induced"

    @property
    def queries(self) -> tuple[str, ...]:
        return (self.query, *self.extra_phi)

    def phi_of(self, query: str) -> np.ndarray:
        """``φ`` under ``query`` (``(K, n)``)."""
        if query == self.query:
            return self.phi
        if query not in self.extra_phi:
            raise InvalidParameterError("query", f"one of the game's queries {list(self.queries)}",
                                        query)
        return self.extra_phi[query]


def _labels_split(data, mask: torch.Tensor, generator: torch.Generator):
    """``data`` with the members labelled (a random third validation) and the rest test."""
    q = data.clone()
    members = mask.nonzero().flatten()
    perm = members[torch.randperm(members.numel(), generator=generator)]
    q.val_mask = torch.zeros_like(mask)
    q.val_mask[perm[:members.numel() // 3]] = True
    q.train_mask = mask & ~q.val_mask
    q.test_mask = ~mask
    return q


def _fit_transductive(method: str, spec, params, data, seed: int):
    """Run a local-DP method's registered fit on ``data``; (logits of every node, epsilon)."""
    from gnnprivacy.method.context import RunContext

    res = spec.fn(RunContext(config=None, params=params, data=data, seed=seed))
    return res.model.logits_, float(res.epsilon)


def train_membership_models(method: str, data, *, num_models: int = 16, params=None,
                            seed: int = 0, noise_multiplier: float | None = None,
                            progress=None, queries=("full",), game: str | None = None
                            ) -> MembershipGame:
    """Train ``num_models`` models of ``method`` on balanced random halves of the nodes.

    Args:
        method: registry name (``gcn``, ``heterpoisson``, ``dpgnn``, ``dpmlp``, ``gap``,
            ``rgnn``, ``lpgnn``, ``ldp-naive`` ...).
        data: the full graph (its own split is ignored: the pool is every node).
        num_models: ``K`` (each node IN for ``K // 2``).
        params: the method's params dataclass, or a dict of its fields.
        seed: seeds memberships and training.
        noise_multiplier: override the calibrated noise (node-DP methods).
        progress: optional callable(k) after each model.
        queries: query graphs, the first one primary (`QUERIES`; ``"full+0hop"`` or a
            sequence).
        game: ``"induced"`` or ``"labels"`` (`GAMES`); default ``"labels"`` for the
            local-DP methods (`TRANSDUCTIVE_METHODS`), else ``"induced"``.

    Raises:
        InvalidParameterError: an unknown query or game, a local-DP method in the
            ``"induced"`` game or with a query other than ``"full"``.
    """
    from gnnprivacy.method.trainers import make_trainer_for
    from gnnprivacy.training.predict import node_logits
    from gnnprivacy.method.registry import get_method

    t0 = time.perf_counter()
    queries = parse_queries(queries)
    transductive = method in TRANSDUCTIVE_METHODS
    game = check_choice("game", "labels" if game is None and transductive else game or "induced",
                        GAMES)
    if transductive and game != "labels":
        raise InvalidParameterError("game", f"'labels' for {method} (trained transductively on "
                                    "the whole public graph)", game)
    if transductive and queries != ("full",):
        raise InvalidParameterError("query", f"'full' for {method} (its predictions are "
                                    "transductive)", "+".join(queries))
    spec = get_method(method)
    if params is None or isinstance(params, dict):
        params = spec.make_params(dict(params or {}))
    rng = np.random.default_rng(seed)
    n = int(data.num_nodes)
    members = balanced_memberships(num_models, n, generator=rng)
    phis = {q: [] for q in queries}
    posts, utility = [], []
    claimed = math.inf
    for k in range(num_models):
        mask = torch.from_numpy(members[k])
        model_seed = seed * 1_000_003 + k
        if transductive:
            split = _labels_split(data, mask, torch.Generator().manual_seed(model_seed))
            logits, claimed = _fit_transductive(method, spec, params, split, model_seed)
            outputs = {"full": logits}
        else:
            trainer = make_trainer_for(method, params, seed=model_seed,
                                       noise_multiplier=noise_multiplier)
            trainer.fit(_induced(data, mask) if game == "induced" else _query(data, mask))
            outputs = {q: node_logits(trainer, _query(data, mask, q)) for q in queries}
            if hasattr(trainer, "epsilon_"):
                claimed = float(trainer.epsilon_)
        for q in queries:
            phis[q].append(_phi(outputs[q], data.y))
        posts.append(torch.softmax(outputs[queries[0]].double(), 1).numpy())
        full = outputs["full"] if "full" in outputs else node_logits(trainer, _query(data, mask))
        utility.append(float((full.argmax(1) == data.y)[~mask].float().mean()))
        if progress is not None:
            progress(k)
    return MembershipGame(method, members, np.stack(phis[queries[0]]), np.stack(posts), claimed,
                          utility, time.perf_counter() - t0, query=queries[0],
                          extra_phi={q: np.stack(phis[q]) for q in queries[1:]}, game=game)


def _summarise(scores: np.ndarray, labels: np.ndarray, seed: int, n_boot: int) -> dict:
    m = attack_metrics(scores, labels)
    m["auc_ci95"] = bootstrap_ci(scores, labels, n_boot=n_boot,
                                 generator=np.random.default_rng(seed))
    m["num_scores"] = int(scores.size)
    return m


def _lira_llr(m: np.ndarray, use: np.ndarray, phi: np.ndarray, x: np.ndarray,
              fixed_variance: bool) -> np.ndarray:
    """Per-node log-likelihood ratio of the target's ``x`` under the IN/OUT Gaussians fitted
    to the shadows' ``phi`` (rows of ``m`` where ``use``)."""
    m_use, m_out = m & use, ~m & use
    in_cnt, out_cnt = m_use.sum(0), m_out.sum(0)
    mu_in = np.where(in_cnt > 0, (phi * m_use).sum(0) / np.maximum(in_cnt, 1), np.nan)
    mu_out = np.where(out_cnt > 0, (phi * m_out).sum(0) / np.maximum(out_cnt, 1), np.nan)
    if fixed_variance:
        sd_in = np.full(phi.shape[1], np.std((phi - mu_in)[m_use]) + 1e-6)
        sd_out = np.full(phi.shape[1], np.std((phi - mu_out)[m_out]) + 1e-6)
    else:
        sd_in = np.sqrt(((phi - mu_in) ** 2 * m_use).sum(0) / np.maximum(in_cnt - 1, 1)) + 1e-6
        sd_out = np.sqrt(((phi - mu_out) ** 2 * m_out).sum(0)
                         / np.maximum(out_cnt - 1, 1)) + 1e-6
    ll_in = -0.5 * ((x - mu_in) / sd_in) ** 2 - np.log(sd_in)
    ll_out = -0.5 * ((x - mu_out) / sd_out) ** 2 - np.log(sd_out)
    return ll_in - ll_out


def lira(game: MembershipGame, *, targets: int | None = None, fixed_variance: bool = True,
         seed: int = 0, n_boot: int = 200, query=None) -> dict:
    """Online LiRA with every (or the first ``targets``) model as target in turn.

    Args:
        game: the trained models.
        targets: how many models serve as target (default all).
        fixed_variance: one IN and one OUT variance for all nodes (advised for few shadows);
            ``False``: per-node variances (the paper's online variant with many shadows).
        seed, n_boot: the balancing draws and the bootstrap of the AUC's CI.
        query: the game's queries to use (``"0hop"``, ``"full+0hop"``, a sequence; default:
            the primary one); with several, the per-query log-likelihood ratios are summed.
    """
    queries = (game.query,) if query is None else parse_queries(query)
    phis = [game.phi_of(q) for q in queries]
    k_all = game.memberships.shape[0]
    targets = k_all if targets is None else min(targets, k_all)
    rng = np.random.default_rng(seed)
    scores, labels = [], []
    for t in range(targets):
        others = np.arange(k_all) != t
        m = game.memberships[others]
        # equal IN/OUT counts per node: drop one random model of the larger side (otherwise
        # leave-one-out biases a null attack's AUC below 0.5)
        use = np.ones_like(m)
        larger = np.where(m.sum(0) > (~m).sum(0), m, np.where(m.sum(0) < (~m).sum(0), ~m, False))
        prio = np.where(larger, rng.random(m.shape), -1.0)
        cols = np.nonzero(larger.any(0))[0]
        use[prio[:, cols].argmax(0), cols] = False
        score = sum(_lira_llr(m, use, phi[others], phi[t], fixed_variance) for phi in phis)
        ok = np.isfinite(score)
        scores.append(score[ok])
        labels.append(game.memberships[t][ok].astype(int))
    out = _summarise(np.concatenate(scores), np.concatenate(labels), seed, n_boot)
    out.update(attack="lira", targets=targets, shadows=k_all - 1, fixed_variance=fixed_variance,
               query="+".join(queries), game=game.game)
    return out


def shadow_attack(game: MembershipGame, *, targets: int | None = 4, top_k: int = 3,
                  seed: int = 0, n_boot: int = 200) -> dict:
    """Shokri-style attack: logistic regression on sorted top-``k`` posteriors (+ true-label
    confidence) of the shadow models, evaluated on each target model."""
    from sklearn.linear_model import LogisticRegression

    k_all = game.memberships.shape[0]
    targets = k_all if targets is None else min(targets, k_all)
    k = min(top_k, game.posteriors.shape[2])

    def feats(j):
        p = np.sort(game.posteriors[j], axis=1)[:, ::-1][:, :k]
        return np.column_stack([np.log(p + 1e-12), game.phi[j]])

    scores, labels = [], []
    for t in range(targets):
        shadows = [j for j in range(k_all) if j != t]
        x = np.concatenate([feats(j) for j in shadows])
        y = np.concatenate([game.memberships[j] for j in shadows]).astype(int)
        clf = LogisticRegression(max_iter=500).fit(x, y)
        scores.append(clf.decision_function(feats(t)))
        labels.append(game.memberships[t].astype(int))
    out = _summarise(np.concatenate(scores), np.concatenate(labels), seed, n_boot)
    out.update(attack="shadow", targets=targets, shadows=k_all - 1)
    return out


def run_membership(method: str, dataset: str, *, data_root=None, num_models: int = 16,
                   params: dict[str, Any] | None = None, seed: int = 0, targets: int | None = None,
                   split_seed: int = 0, data=None, query="full", fixed_variance: bool = True,
                   game: str | None = None) -> dict:
    """Train the models of the membership game and run LiRA and the shadow attack.

    Args:
        method, dataset, data_root, split_seed, data: what to attack (``data`` overrides the
            loaded dataset).
        num_models: ``K >= 4`` trained models (each node IN for ``K // 2``).
        params: the method's parameters (a dict of its fields).
        seed: memberships, training and bootstrap seed.
        targets: how many models serve as LiRA target (default all).
        query: the attacker's query graph(s): ``"full"`` (default), ``"0hop"`` or
            ``"full+0hop"`` (LiRA sums the per-query log-likelihood ratios; the shadow attack
            uses the first).
        fixed_variance: LiRA's global variance (default) or per-node variances.
        game: ``"induced"`` or ``"labels"`` (default: by method, see
            `train_membership_models`).
    """
    check_int("num_models", num_models, low=4)  # LiRA: IN and OUT shadows for every node
    queries = parse_queries(query)
    if data is None:
        from gnnprivacy.datasets import load_dataset

        data = load_dataset(dataset, root=data_root, seed=split_seed)
    game_ = train_membership_models(method, data, num_models=num_models, params=params, seed=seed,
                                    queries=queries, game=game)
    return {"method": method, "dataset": dataset, "num_models": num_models,
            "game": game_.game, "query": "+".join(queries),
            "claimed_epsilon": game_.claimed_epsilon,
            "nonmember_accuracy": float(np.mean(game_.utility)),
            "lira": lira(game_, targets=targets, seed=seed, query=queries,
                         fixed_variance=fixed_variance),
            "shadow": shadow_attack(game_, seed=seed), "seconds": game_.seconds}
