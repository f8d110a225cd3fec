"""HeteroRR end to end and its baselines in one harness (spec 001 §3.7, §5.3).

`release` replaces a graph's features and/or edges by a DP-protected copy with one of

* features: ``featurerr`` (FeatureRR, the budget split by scores, released minus the public
  constant ``(k+1)/(2k)``: free post-processing that keeps an all-positive input from stalling
  the GCN; ``featurerr-raw`` releases the spec-literal levels ``u/k`` in ``[1/k, 1]``) or a baseline applied to every
  coordinate with ``eps_f / d`` (``duchi``, ``piecewise``, ``hybrid``, ``three-output``,
  ``pm-sub``) or LPGNN's ``multibit`` encoder (whole vector, rectified), or ``clean``;
* edges: ``edgerr`` (private edges only, public edges kept), or one of the whole-graph baselines
  ``privhrg``, ``edgerand``, ``lapgraph``, or ``clean``.

Every noisy step composes its event into one of two accountants: unit ``FEATURE`` (relation
``REPLACE``, local DP) and unit ``EDGE`` (relation ``ADD_OR_REMOVE``), one per unit (spec §4.6);
a method releasing both states their sum under the joint relation
(`gnnprivacy.method.builtin.heterorr`). Training on the released graph is
post-processing.

Scores for FeatureRR (no masked inputs exist for these datasets, so ``beta = 1/d`` and
``theta = gamma alpha + (1 - gamma)/d``): ``score_source="public_nodes"`` (sound default) fits
the gradient-x-input importance on a seeded random set of reference nodes whose features and
labels are declared public (so they are outside the feature guarantee: the record lists them
under ``unaccounted`` and their ids under ``info``); ``"uniform"`` uses ``theta = 1/d``
(nothing data-dependent); ``"private"`` (the paper's practice, spec E7) uses every training
node's private features and is tagged ``heuristic``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from gnnprivacy._validation import check_choice, check_int, check_probability, check_real
from gnnprivacy.accounting import make_accountant
from gnnprivacy.errors import InvalidParameterError

FEATURE_METHODS = ("clean", "featurerr", "featurerr-raw", "duchi", "piecewise", "hybrid", "three-output",
                   "pm-sub", "multibit")
EDGE_METHODS = ("clean", "edgerr", "privhrg", "edgerand", "lapgraph")
SCORE_SOURCES = ("public_nodes", "uniform", "private")

__all__ = ["EDGE_METHODS", "FEATURE_METHODS", "Release", "SCORE_SOURCES", "release"]


@dataclass
class Release:
    """A released graph with its two accountants and what the record needs."""

    data: object
    feature_accountant: object
    edge_accountant: object
    private_edges: np.ndarray
    public_edges: np.ndarray
    privacy: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)


def _eps(name, value):
    eps = check_real(name, value, low=0.0, low_open=True)
    if math.isinf(eps):
        raise InvalidParameterError(name, "a finite real number > 0", value)
    return eps


def _theta(data, x01: torch.Tensor, *, source: str, gamma: float, public_frac: float,
           rng: np.random.Generator, gen: torch.Generator):
    d = x01.size(1)
    if source == "uniform":
        return np.full(d, 1.0 / d), "none", {}
    from gnnprivacy.ldp.heterorr.scores import gradient_importance, unified_scores

    if source == "public_nodes":
        count = max(2, int(round(public_frac * data.num_nodes)))
        nodes = torch.as_tensor(rng.choice(data.num_nodes, size=count, replace=False))
        # their raw features and labels set theta for every node: declared public, outside
        # the feature guarantee (the record lists them under unaccounted and names them)
        tag, extra = "proved", {"public_reference_nodes": count,
                                "public_reference_node_ids": sorted(int(i) for i in nodes)}
    else:
        nodes = torch.nonzero(data.train_mask).view(-1)
        tag, extra = "heuristic", {"score_note": "importance from private features (E7)",
                                   "private_score_nodes": int(nodes.numel())}
    alpha = gradient_importance(x01[nodes].float(), data.y[nodes],
                                num_classes=int(data.num_classes), generator=gen)
    return unified_scores(alpha, np.full(d, 1.0 / d), gamma), tag, extra


def _features(data, method, eps_f, *, levels, gamma, score_source, public_frac, acc, rng, gen):
    from gnnprivacy.ldp.heterorr.feature_rr import FeatureRR, normalize_features

    x = data.x.to(torch.float64)
    d = x.size(1)
    x01 = normalize_features(x, "row_minmax")
    if method in ("featurerr", "featurerr-raw"):
        theta, tag, extra = _theta(data, x01, source=score_source, gamma=gamma,
                                   public_frac=public_frac, rng=rng, gen=gen)
        mech = FeatureRR(epsilon=eps_f, num_features=d, k=levels, theta=theta)
        out = mech(x, generator=gen)
        if method == "featurerr":               # public constant shift: post-processing
            out = out - (levels + 1) / (2 * levels)
        acc.compose(mech.event)
        return out, {"feature_guarantee": tag, "theta_max": float(theta.max()),
                     "theta_min": float(theta.min()), **extra}
    signed = 2.0 * x01 - 1.0                          # spec E32: baselines get [-1, 1]
    if method == "multibit":
        from gnnprivacy.mechanisms.multibit import MultiBit

        mech = MultiBit(epsilon=eps_f, num_features=d, lower=-1.0, upper=1.0, clip=True)
        out = mech.rectify(mech(signed, generator=gen))
        acc.compose(mech.event)
        return out, {"feature_guarantee": "proved", "multibit_m": mech.m}
    from gnnprivacy.mechanisms.feature_ldp import FEATURE_MECHANISMS

    mech = FEATURE_MECHANISMS[method](epsilon=eps_f / d)
    out = mech(signed, generator=gen)
    acc.compose(mech.event, count=d)                  # d coordinates at eps_f / d each
    return out, {"feature_guarantee": "proved", "per_coordinate_epsilon": eps_f / d}


def _edges(data, method, eps_e, pub, pri, *, edge_split, mode, mcmc_steps, acc, rng):
    from gnnprivacy.ldp.heterorr.edge_rr import edge_rr, priv_hrg
    from gnnprivacy.mechanisms.edge_dp import edge_rand, lap_graph

    n = data.num_nodes
    if method == "edgerr":
        out = edge_rr(pub, pri, n, epsilon=eps_e, generator=rng, split=edge_split, mode=mode,
                      steps=mcmc_steps, accountant=acc)
        return out.edge_index, {"edge_guarantee": out.guarantee, **out.info}
    all_edges = np.concatenate([pub, pri], axis=1)
    if method == "privhrg":
        out = priv_hrg(all_edges, n, epsilon=eps_e, generator=rng, split=edge_split,
                       steps=mcmc_steps, accountant=acc)
        return out.edge_index, {"edge_guarantee": out.guarantee, **out.info}
    fn = edge_rand if method == "edgerand" else lap_graph
    ei = fn(all_edges, n, epsilon=eps_e, generator=rng, accountant=acc)
    return ei, {"edge_guarantee": "proved", "num_released_edges": int(ei.size(1)) // 2}


def release(data, *, feature_method: str = "featurerr", edge_method: str = "edgerr",
            eps_f: float | None = None, eps_e: float | None = None,
            private_edge_frac: float = 0.3, levels: int = 10, gamma: float = 0.5,
            score_source: str = "public_nodes", public_node_frac: float = 0.1,
            edge_split: float = 0.5, mode: str = "sound", mcmc_steps: int | None = None,
            seed_for=None) -> Release:
    """Privatise ``data`` (see the module docstring); ``seed_for(purpose) -> int`` seeds streams.

    Raises:
        InvalidParameterError: a budget ``<= 0`` for a private method, ``private_edge_frac``
            outside ``[0, 1]``, no private edge for ``edgerr``, unknown method names.
    """
    from gnnprivacy.ldp.heterorr.edge_rr import split_edges

    fm = check_choice("feature_method", feature_method, FEATURE_METHODS)
    em = check_choice("edge_method", edge_method, EDGE_METHODS)
    rho = check_probability("private_edge_frac", private_edge_frac)
    check_int("levels", levels, low=2)
    check_probability("gamma", gamma)
    check_choice("score_source", score_source, SCORE_SOURCES)
    check_probability("public_node_frac", public_node_frac, allow_zero=False)
    if fm != "clean":
        eps_f = _eps("eps_f", eps_f)
    if em != "clean":
        eps_e = _eps("eps_e", eps_e)
    seed_for = seed_for or (lambda purpose: 0)
    n = data.num_nodes
    pub, pri = split_edges(data.edge_index, n, private_frac=rho,
                           rng=np.random.default_rng(seed_for("edge-split")))
    facc = make_accountant("pld", unit="feature", relation="replace")
    eacc = make_accountant("pld", unit="edge", relation="add_or_remove")
    out = data.clone()
    info = {"feature_method": fm, "edge_method": em, "private_edge_frac": rho,
            "num_private_edges": int(pri.shape[1]), "num_public_edges": int(pub.shape[1])}
    if fm != "clean":
        gen = torch.Generator().manual_seed(seed_for("feature-noise") & ((1 << 63) - 1))
        x, finfo = _features(data, fm, eps_f, levels=levels, gamma=gamma,
                             score_source=score_source, public_frac=public_node_frac, acc=facc,
                             rng=np.random.default_rng(seed_for("score-nodes")), gen=gen)
        out.x = x.to(data.x.dtype)
        info.update(finfo)
    if em != "clean":
        ei, einfo = _edges(data, em, eps_e, pub, pri, edge_split=edge_split, mode=mode,
                           mcmc_steps=mcmc_steps, acc=eacc,
                           rng=np.random.default_rng(seed_for("edge-noise")))
        out.edge_index = ei
        info.update(einfo)
    privacy = _privacy_record(fm, em, facc, eacc, info, rho)
    return Release(out, facc, eacc, pri, pub, privacy, info)


def _privacy_record(fm, em, facc, eacc, info, rho) -> dict:
    eps_f = facc.get_epsilon(0.0) if fm != "clean" else math.inf
    eps_e = eacc.get_epsilon(0.0) if em != "clean" else math.inf
    unaccounted = ["labels", "train/val/test split", "which edges are declared private"]
    if info.get("public_reference_nodes"):
        unaccounted.append(
            f"raw features and labels of the {info['public_reference_nodes']} public reference "
            "nodes that set FeatureRR's budget split theta (declared public: the feature "
            "guarantee covers the other nodes; ids under info.public_reference_node_ids)")
    if info.get("private_score_nodes"):
        unaccounted.append(
            f"raw features and labels of the {info['private_score_nodes']} training nodes "
            "that set theta (score_source=private, the paper's practice: heuristic)")
    if fm == "clean":
        unaccounted.append("node features (released unprotected)")
    if em == "clean":
        unaccounted.append("edges (released unprotected)")
    elif em == "edgerr":
        unaccounted.append(f"public edges (a declared random {1 - rho:.0%} of the edges)")
    ref = info.get("public_reference_nodes")
    who = f" (except the {ref} public reference nodes)" if ref else ""
    return {"unit": {"features": "feature", "edges": "edge"},
            "relation": {"features": "replace", "edges": "add_or_remove"},
            "scope": f"features: eps_f-LDP per node's feature vector{who}; edges: eps_e-edge-DP "
                     "for one private edge (EdgeRR) or any edge (baselines); each part under "
                     "its own unit (§4.6), both together: eps_f + eps_e",
            "epsilon_features": eps_f, "epsilon_edges": eps_e, "delta": 0.0,
            "guarantees": {"features": info.get("feature_guarantee", "none"),
                           "edges": info.get("edge_guarantee", "none")},
            "unaccounted": unaccounted}
