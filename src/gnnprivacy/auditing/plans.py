"""From a registered private method and its configuration to the mechanism an audit attacks.

A `MechanismPlan` is what a method would run on a dataset: the phases of per-step
shift laws (`gnnprivacy.auditing.laws`) with the noise the method calibrates for the
target (ε, δ), or, for local-DP methods, the exact-enumeration audits of their randomizers.
The configuration is derived exactly as the trainers derive it (same defaults for ``q_b``,
``T``, δ, batch sizes) and the noise is calibrated by the same accountant calls, so the
audit attacks the noise a training run would use.

``noise_scale`` multiplies the calibrated noise: ``noise_scale=0.25`` is the positive
control of spec 000 §8 AU2 (a noise multiplier 4x too small while still claiming ε).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from gnnprivacy._validation import check_positive
from gnnprivacy.auditing.laws import Phase, dpgnn_law, dpsgd_law, gaussian_law, heterpoisson_law
from gnnprivacy.errors import InvalidParameterError

__all__ = ["MechanismPlan", "GraphFacts", "plan_for", "PLANNERS", "LOCAL_METHODS"]

LOCAL_METHODS = ("rgnn", "lpgnn", "ldp-naive")
#: HeteroRR (spec 001) methods with an exact audit: feature part, edge part (EdgeRR's
#: exponential-mechanism step on a tiny graph), or both
HETERORR_METHODS = {"heterorr": ("featurerr", "edgerr"), "featurerr": ("featurerr", None),
                    "edgerr": (None, "edgerr"), "feat-multibit": ("multibit", None),
                    "feat-duchi": ("duchi", None), "feat-piecewise": ("piecewise", None),
                    "feat-hybrid": ("hybrid", None), "feat-three-output": ("three-output", None),
                    "feat-pm-sub": ("pm-sub", None), "edge-privhrg": (None, "privhrg"),
                    "edge-rand": (None, "edgerand"), "edge-lapgraph": (None, "lapgraph")}


@dataclass(frozen=True)
class GraphFacts:
    """The public sizes a plan needs: nodes, training nodes, largest out-degree, degrees."""

    num_nodes: int
    num_train: int
    max_out_degree: int
    median_degree: int
    num_features: int = 1
    num_classes: int = 2
    dataset: str = ""

    @classmethod
    def from_data(cls, data) -> GraphFacts:
        import torch

        from gnnprivacy.training.nonprivate import num_classes_of, training_graph

        if hasattr(data, "graphs"):          # a GraphSet (--task graph): units are graphs
            return cls(num_nodes=int(data.num_nodes), num_train=int(data.split.sizes["train"]),
                       max_out_degree=0, median_degree=0, num_features=data.num_features,
                       num_classes=data.num_classes, dataset=data.name)
        graph = training_graph(data)
        deg = torch.bincount(graph.edge_index[0], minlength=graph.num_nodes)
        return cls(num_nodes=int(data.num_nodes), num_train=int(graph.train_mask.sum()),
                   max_out_degree=int(deg.max()) if deg.numel() else 0,
                   median_degree=int(deg.median()) if deg.numel() else 0,
                   num_features=int(data.x.shape[1]),
                   num_classes=num_classes_of(data),
                   dataset=str(getattr(data, "name", "")).lower())


@dataclass
class MechanismPlan:
    """The mechanism of one method on one dataset, as audited.

    Attributes:
        method: registry name.
        phases: ``{label: [Phase, ...]}`` — one phase list per audited canary variant (e.g.
            per out-degree D for HeterPoisson); the reported bound is the max over them.
        epsilon_claimed: the ε the method claims (its calibration target).
        delta: δ of the claim.
        noise_multiplier: the (possibly scaled) noise multiplier used.
        facts: configuration facts recorded with the result.
        local: exact-audit results for local methods (then ``phases`` is empty).
        insert_probability: canary insertion probability of the paper-literal mode.
    """

    method: str
    phases: dict[str, list[Phase]]
    epsilon_claimed: float
    delta: float
    noise_multiplier: float | None
    facts: dict[str, Any] = field(default_factory=dict)
    local: list[dict] | None = None
    insert_probability: float = 1.0


@functools.lru_cache(maxsize=128)
def _calibrate(builder: str, params: tuple, steps: int, epsilon: float, delta: float,
               kind: str) -> float:
    from gnnprivacy.accounting import (calibrate_noise_multiplier, dpgnn_event, dpsgd_event,
                                       heterpoisson_event)

    fn = {"heterpoisson": heterpoisson_event, "dpgnn": dpgnn_event, "dpsgd": dpsgd_event}[builder]
    kw = dict(params)
    return calibrate_noise_multiplier(lambda z: fn(noise_multiplier=z, **kw), steps=steps,
                                      target_epsilon=epsilon, target_delta=delta, accountant=kind)


def trainer_kwargs(params, facts: GraphFacts) -> dict:
    """The trainer arguments ``params`` resolve to on a graph with ``facts`` (presets)."""
    try:
        kw = params.trainer_kwargs(num_train=facts.num_train, num_nodes=facts.num_nodes,
                                   num_features=facts.num_features,
                                   num_classes=facts.num_classes)
    except TypeError:
        kw = params.trainer_kwargs()
    return kw


class _Kw:
    """Attribute access to a kwargs dict (missing keys read as None)."""

    def __init__(self, kw: dict):
        self.__dict__.update(kw)

    def __getattr__(self, name):
        return None


def _plan_heterpoisson(p, g: GraphFacts, noise_scale: float, degrees) -> MechanismPlan:
    q_b = p.q_b if p.q_b is not None else min(1.0, 4096.0 / g.num_nodes)
    steps = p.steps or math.ceil(p.epochs / q_b)
    delta = p.delta if p.delta is not None else float(g.num_nodes) ** -1.1
    d_max = g.max_out_degree if p.degree_public else g.num_nodes - 1
    mode = "paper" if p.accounting == "paper" else "sound"
    overlap = True if p.enforce_no_overlap is None else bool(p.enforce_no_overlap)
    z = _calibrate("heterpoisson", (("q_b", q_b), ("M", p.M), ("max_out_degree", d_max),
                                    ("overlap_removal", overlap), ("mode", mode)),
                   steps, p.epsilon, delta, "pld" if mode == "sound" else "rdp")
    z_used = z * noise_scale
    degrees = sorted({d_max, g.max_out_degree, g.median_degree} if degrees is None
                     else {int(d) for d in degrees})
    if degrees and degrees[-1] > g.num_nodes - 1:  # a law over degree+1 outcomes: bounded by the graph
        raise InvalidParameterError("degrees", f"out-degrees in [0, {g.num_nodes - 1}] (the graph has "
                                    f"{g.num_nodes} nodes)", degrees[-1])
    phases = {f"D={d}": [Phase(heterpoisson_law(q_b=q_b, M=p.M, degree=d,
                                                noise_multiplier=z_used,
                                                overlap_removal=overlap), steps)]
              for d in degrees}
    return MechanismPlan("heterpoisson", phases, p.epsilon, delta, z_used, insert_probability=q_b,
                         facts={"q_b": q_b, "M": p.M, "steps": steps, "max_out_degree_accounted":
                                d_max, "accounting": p.accounting, "calibrated_noise_multiplier":
                                z, "sigma": z_used * p.clip_norm, "degrees_audited": degrees})


def _plan_dpgnn(p, g: GraphFacts, noise_scale: float, degrees) -> MechanismPlan:
    m = min(10000, g.num_train) if p.batch_size is None else p.batch_size
    steps = p.steps or math.ceil((p.epochs or 20) * g.num_train / m)
    delta = p.delta if p.delta is not None else 1.0 / (10.0 * g.num_train)
    lam = _calibrate("dpgnn", (("num_train", g.num_train), ("batch_size", m),
                               ("max_degree", p.max_degree), ("sampling", p.sampling)),
                     steps, p.epsilon, delta, "rdp")
    used = lam * noise_scale
    law = dpgnn_law(num_train=g.num_train, max_degree=p.max_degree, batch_size=m,
                    noise_multiplier=used, sampling=p.sampling)
    return MechanismPlan("dpgnn", {f"K={p.max_degree}": [Phase(law, steps)]}, p.epsilon, delta,
                         used, facts={"batch_size": m, "steps": steps, "max_degree": p.max_degree,
                                      "sampling": p.sampling, "calibrated_noise_multiplier": lam,
                                      "relation": "replace" if p.sampling == "fixed"
                                      else "add_or_remove"})


def _plan_dpmlp(p, g: GraphFacts, noise_scale: float, degrees) -> MechanismPlan:
    batch = 2048 if p.batch_size is None else p.batch_size
    q = min(1.0, batch / g.num_train)
    steps = p.steps or math.ceil((p.epochs or 5) / q)
    delta = p.delta if p.delta is not None else 1.0 / (10.0 * g.num_train)
    z = _calibrate("dpsgd", (("sample_rate", q),), steps, p.epsilon, delta, "pld")
    used = z * noise_scale
    return MechanismPlan("dpmlp", {"dpsgd": [Phase(dpsgd_law(sample_rate=q, noise_multiplier=used),
                                                   steps)]}, p.epsilon, delta, used,
                         insert_probability=q,
                         facts={"sample_rate": q, "steps": steps, "calibrated_noise_multiplier": z})


def _plan_dpsgd_graph(p, g: GraphFacts, noise_scale: float, degrees) -> MechanismPlan:
    """``dpsgd-graph``: Poisson sampling of training graphs at ``q = batch / N`` for
    ``ceil(epochs / q)`` steps, the plan of ``make_private(sampler="graphs")``."""
    m = min(p.batch_size, g.num_train)
    q = m / g.num_train
    steps = math.ceil(p.epochs / q)
    delta = p.delta if p.delta is not None else 1.0 / (10.0 * g.num_train)
    z = _calibrate("dpsgd", (("sample_rate", q),), steps, p.epsilon, delta, "pld")
    used = z * noise_scale
    return MechanismPlan("dpsgd-graph", {"dpsgd": [Phase(dpsgd_law(sample_rate=q,
                                                                   noise_multiplier=used),
                                                         steps)]}, p.epsilon, delta, used,
                         insert_probability=q,
                         facts={"sample_rate": q, "steps": steps, "unit": "graph",
                                "calibrated_noise_multiplier": z})


def _plan_gap(p, g: GraphFacts, noise_scale: float, degrees) -> MechanismPlan:
    from gnnprivacy.training.gap import gap_privacy_plan

    plan = gap_privacy_plan(p, num_train=g.num_train, num_nodes=g.num_nodes)
    z = plan["noise_multiplier"] * noise_scale
    q, d = plan["sample_rate"], plan["max_degree"]
    agg_std = z * plan["aggregation_sensitivity"]
    phases = [Phase(dpsgd_law(sample_rate=q, noise_multiplier=z), plan["encoder_steps"], "encoder"),
              Phase(gaussian_law(sensitivity=plan["true_sensitivity"], noise_std=agg_std),
                    plan["hops"], "aggregation"),
              Phase(dpsgd_law(sample_rate=q, noise_multiplier=z), plan["classifier_steps"],
                    "classifier")]
    return MechanismPlan("gap", {f"D={d}": phases}, p.epsilon, plan["delta"], z,
                         insert_probability=q, facts={**plan, "noise_multiplier_used": z})


def _plan_local(method: str, p, g: GraphFacts, noise_scale: float, degrees,
                epsilon_total: float | None = None) -> MechanismPlan:
    from gnnprivacy.auditing.local import grr_audit, grr_fs_audit, multibit_audit
    from gnnprivacy.method.builtin.ldp import PAPER_GROUP_SIZES

    if noise_scale != 1.0:
        raise InvalidParameterError("noise_scale", "1.0 for local-DP methods (exact audit)",
                                    noise_scale)
    group = p.group_size or PAPER_GROUP_SIZES.get(g.dataset, 1)
    d = max(1, math.ceil(g.num_features / group))
    m = min(p.m or d, d)
    mode = getattr(p, "eps_mode", "sound")
    eps_x, eps_y = p.eps_x, p.eps_y
    if epsilon_total is not None:         # split a total budget: half features, half label
        eps_x, eps_y = epsilon_total / (2.0 * m), epsilon_total / 2.0
    if method == "lpgnn":
        feats = multibit_audit(epsilon=m * eps_x, d=d, m=m)
    else:
        feats = grr_fs_audit(eps_x=eps_x, m=m, d=d, mode=mode)
    label = grr_audit(eps_y, max(2, g.num_classes))
    claimed = feats["epsilon_claimed"] + label["epsilon_claimed"]
    return MechanismPlan(method, {}, claimed, 0.0, None, local=[feats, label],
                         facts={"eps_x": eps_x, "eps_y": eps_y, "m": m, "d_reported": d,
                                "group_size": group, "eps_mode": mode,
                                "epsilon_claimed_features": feats["epsilon_claimed"],
                                "epsilon_audited_features": feats["epsilon"]})


def _plan_heterorr(method: str, p, g: GraphFacts, noise_scale: float,
                   epsilon_total: float | None = None) -> MechanismPlan:
    """Exact audits of HeteroRR's parts. A one-part method is audited on its part; heterorr
    (both parts) on their sum, the total its record states under the joint relation (one
    node's features replaced and one private edge added or removed), each part beside it."""
    from gnnprivacy.auditing.local import (edge_rand_audit, edge_rr_audit, feature_rr_audit,
                                           lapgraph_audit, multibit_audit, one_dim_ldp_audit)

    if noise_scale != 1.0:
        raise InvalidParameterError("noise_scale", "1.0 for exact audits", noise_scale)
    feat, edge = HETERORR_METHODS[method]
    # a feature-only method has no edge options and an edge-only one no feature options
    eps_f = getattr(p, "eps_f", None) if epsilon_total is None or edge else epsilon_total
    eps_e = getattr(p, "eps_e", None) if epsilon_total is None else epsilon_total
    comps = []
    if edge in ("edgerr", "privhrg"):
        eps_e1 = eps_e * p.edge_split
        # privHRG is EdgeRR with every edge private (its own sound exponential mechanism)
        pub, pri = (([[0, 1], [1, 2]], [[2, 3, 0], [3, 4, 4]]) if edge == "edgerr" else
                    ([[], []], [[0, 1, 2, 3, 0], [1, 2, 3, 4, 4]]))
        e = edge_rr_audit(5, pub, pri, eps_e1=eps_e1,
                          c_em=2.0 if getattr(p, "mode", "sound") == "sound" else 1.0)
        e["note"] = (f"{'EdgeRR' if edge == 'edgerr' else 'privHRG'}'s exponential-mechanism "
                     "step (eps_e1 = edge_split * eps_e) by exact enumeration of every "
                     "dendrogram of a 5-node graph")
        comps.append(e)
    elif edge == "edgerand":
        comps.append(edge_rand_audit(epsilon=eps_e))
    elif edge == "lapgraph":
        comps.append(lapgraph_audit(epsilon=eps_e))
    if feat == "featurerr":
        comps.append(feature_rr_audit(epsilon=eps_f, num_features=g.num_features, k=p.levels))
    elif feat == "multibit":
        comps.append(multibit_audit(epsilon=eps_f, d=g.num_features))
    elif feat is not None:
        comps.append(one_dim_ldp_audit(feat, epsilon=eps_f, d=g.num_features))
    both = bool(feat and edge)
    # both parts: the record claims their total under the joint relation (issue 22 item 5),
    # so the exact figures are summed against the summed claims
    claimed = (sum(c["epsilon_claimed"] for c in comps) if both
               else comps[0]["epsilon_claimed"])
    return MechanismPlan(method, {}, claimed, 0.0, None, local=comps,
                         facts={"combine": "sum" if both else "primary",
                                "unit": "feature+edge" if both else "edge" if edge else "feature",
                                "eps_f": eps_f if feat else None, "eps_e": eps_e if edge else None,
                                "mode": getattr(p, "mode", None)})


PLANNERS = {"heterpoisson": _plan_heterpoisson, "dpgnn": _plan_dpgnn, "dpmlp": _plan_dpmlp,
            "gap": _plan_gap, "dpsgd-graph": _plan_dpsgd_graph}


def plan_for(method: str, params, facts: GraphFacts, *, noise_scale: float = 1.0,
             degrees=None, epsilon_total: float | None = None) -> MechanismPlan:
    """The `MechanismPlan` of ``method`` with ``params`` on a graph with ``facts``.

    ``epsilon_total`` (local-DP methods only): audit the user budget split as
    ``eps_x = E / (2m)`` per sampled feature and ``eps_y = E / 2`` (claimed total ``E``).

    Raises:
        InvalidParameterError: the method is not private or has no audit plan.
    """
    noise_scale = check_positive("noise_scale", noise_scale)
    if method in LOCAL_METHODS:
        return _plan_local(method, params, facts, noise_scale, degrees, epsilon_total)
    if method in HETERORR_METHODS:
        return _plan_heterorr(method, params, facts, noise_scale, epsilon_total)
    if method not in PLANNERS:
        raise InvalidParameterError("method", f"a private method with an audit plan "
                                    f"({', '.join(sorted(PLANNERS) + list(LOCAL_METHODS) + list(HETERORR_METHODS))})",
                                    method)
    if method in ("gap", "dpsgd-graph"):
        return PLANNERS[method](params, facts, noise_scale, degrees)
    return PLANNERS[method](_Kw(trainer_kwargs(params, facts)), facts, noise_scale, degrees)
