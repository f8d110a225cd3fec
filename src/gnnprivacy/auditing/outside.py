"""The boundary checks of the code audit: what was released against what was accounted.

Each check reads what `gnnprivacy.training.dp.audit_observer.EngineObserver` saw at an
engine's boundary during one real training run and compares it with the accountant's step
event and ledger, never with the engine's own expectation:

1. ``sampling_rate``: the executed rate of the units (subgraph centres) against the rate in
   the event. A unit seen ``c ≥ 1`` times in ``T`` steps is, under the event, a
   ``Binomial(T, q)`` count conditioned on ``c ≥ 1`` (the units never seen need not be
   known); the sum over the seen units is compared with its mean by a one-sided normal
   test at false-alarm rate ``alpha``.
2. ``releases``: the optimizer steps on the model's parameters against the ledger's count of
   the engine's event; a step with no engine sum behind it, and parameters that moved after
   the last observed step, fail it.
3. ``clip``: the engine's pre-noise sum against the per-subgraph gradients recomputed
   independently and clipped per group at the reported norms (relative tolerance 1e-3).
4. ``noise``: per parameter, the released gradient times the expected batch minus the
   pre-noise sum has the std the event accounts for (its noise multiplier times the clip
   norm; DP-GNN's ``λ · 2(K+1) · C``), not merely the engine's own ``noise_std``
   (two-sided chi-square test, Bonferroni over the parameters, total false-alarm rate
   ``alpha``).
5. ``occurrence``: the most subgraphs one node lay in, per step (and, for DP-GNN's fixed
   rows, over the run), against the bound the event assumes: 1 for Poisson-sampled
   nodes, ``K + 1`` for DP-GNN, for HeterPoisson 1 for a centre (with overlap removal) and
   the accounted out-degree ``D`` otherwise; for the edge unit, the most subgraphs of a
   step that hold one edge (`edge_occurrence_check`) against the event's ``occurrence``.

A check that could not be made (nothing observed) reports ``checked: False`` and does not
fail; `gnnprivacy.auditing.code.code_audit` lists every failed check and flags the run.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["boundary_checks", "clip_check", "edge_occurrence_check", "event_noise_std",
           "noise_check", "occurrence_check", "rate_check", "release_check"]

#: false-alarm rate of each statistical check
ALPHA = 1e-3
#: relative tolerance of the recomputed clipped sum
CLIP_TOLERANCE = 1e-3


def _inner(event):
    from gnnprivacy.accounting.events import ScopedDpEvent

    return event.event if isinstance(event, ScopedDpEvent) else event


def rate_check(observer, event, *, alpha: float = ALPHA) -> dict[str, Any]:
    """Check 1 (see the module docstring)."""
    from scipy.stats import norm

    from gnnprivacy.training.dp.audit_hooks import step_sampling

    members = observer.members
    if not members or any(m is None for m in members):
        return {"checked": False, "why": "batch membership not observed in every step"}
    inner = _inner(event)
    from gnnprivacy.accounting.events import DpGnnDpEvent

    q = (inner.batch_size / inner.num_train if isinstance(inner, DpGnnDpEvent)
         else step_sampling(event)[0])
    steps = len(members)
    centers = torch.cat([m.centers for m in members])
    out: dict[str, Any] = {"checked": True, "event_rate": q, "steps": steps}
    if centers.numel() == 0:
        return {**out, "passed": True, "units_seen": 0}
    counts = torch.bincount(centers)
    seen = counts[counts > 0].double()
    units, total = int(seen.numel()), float(seen.sum())
    out.update(units_seen=units, memberships=int(total))
    if int(counts.max()) > steps:
        return {**out, "passed": False, "detail": "a unit is a centre twice in one step"}
    if q >= 1.0:
        return {**out, "passed": True, "executed_rate": 1.0}
    p_seen = 1.0 - (1.0 - q) ** steps
    mean = steps * q / p_seen
    var = (steps * q * (1 - q) + (steps * q) ** 2) / p_seen - mean ** 2
    z = (total - units * mean) / math.sqrt(max(units * var, 1e-300))
    threshold = float(norm.ppf(1 - alpha))
    # the executed rate that matches the observed mean count of a seen unit (bisection)
    lo, hi = 1e-12, 1.0 - 1e-12
    target = total / units
    for _ in range(60):
        mid = (lo + hi) / 2
        if steps * mid / (1 - (1 - mid) ** steps) < target:
            lo = mid
        else:
            hi = mid
    return {**out, "executed_rate": (lo + hi) / 2, "z": z, "threshold": threshold,
            "false_alarm": alpha, "passed": z <= threshold}


def occurrence_check(observer, event) -> dict[str, Any]:
    """Check 5 (see the module docstring)."""
    from dp_accounting import dp_event

    from gnnprivacy.accounting.events import DpGnnDpEvent, HeterPoissonDpEvent

    members = [m for m in observer.members if m is not None]
    if not members:
        return {"checked": False, "why": "batch membership not observed"}
    inner = _inner(event)
    from gnnprivacy.accounting.events import EdgeSubgraphDpEvent

    if isinstance(inner, EdgeSubgraphDpEvent):
        return edge_occurrence_check(members, inner)
    worst = {"count": 0, "node": None, "step": None}
    bad = None
    for t, m in enumerate(members):
        if m.nodes.numel() == 0:
            continue
        pairs = torch.unique(torch.stack([m.nodes, m.subgraphs]), dim=1)
        occ = torch.bincount(pairs[0])
        node = int(occ.argmax())
        if int(occ[node]) > worst["count"]:
            worst = {"count": int(occ[node]), "node": node, "step": t}
        if isinstance(inner, HeterPoissonDpEvent):
            central = torch.zeros_like(occ, dtype=torch.bool)
            central[m.centers] = True
            limit = inner.max_degree + (0 if inner.overlap_removal else 1)
            if inner.overlap_removal and bool((occ[central] > 1).any()) and bad is None:
                bad = f"step {t}: a centre also lies in another subgraph (overlap removal)"
            others = occ[~central]
            top = int(others.max()) if others.numel() else 0
            if top > limit and bad is None:
                bad = f"step {t}: a node lies in {top} > {limit} subgraphs"
    if isinstance(inner, DpGnnDpEvent):
        bound = inner.max_degree + 1
        rows = {}
        for m in members:
            for c, grp in zip(m.centers.tolist(), range(m.centers.numel())):
                rows[c] = m.nodes[m.subgraphs == grp]
        run = torch.cat([torch.unique(v) for v in rows.values()])
        run_max = int(torch.bincount(run).max()) if run.numel() else 0
        return {"checked": True, "bound": bound, "max_per_step": worst["count"],
                "max_over_run": run_max, "node": worst["node"],
                "passed": max(worst["count"], run_max) <= bound}
    if isinstance(inner, HeterPoissonDpEvent):
        return {"checked": True, "bound": inner.max_degree, "max_per_step": worst["count"],
                "node": worst["node"], "passed": bad is None,
                **({"detail": bad} if bad else {})}
    if isinstance(inner, (dp_event.PoissonSampledDpEvent, dp_event.GaussianDpEvent)):
        return {"checked": True, "bound": 1, "max_per_step": worst["count"],
                "node": worst["node"], "passed": worst["count"] <= 1}
    return {"checked": False, "why": f"no occurrence bound for {type(inner).__name__}"}


def edge_occurrence_check(members, event) -> dict[str, Any]:
    """Check 5 for the edge unit: in every step, the most subgraphs that hold one unit edge
    (an undirected pair counts both of its entries) against the event's ``occurrence``."""
    worst = {"count": 0, "edge": None, "step": None}
    for t, m in enumerate(members):
        if m.edges is None:
            return {"checked": False, "why": "the batch's edges were not observed"}
        if m.edges.shape[1] == 0:
            continue
        src, dst, sub = m.edges
        if event.undirected:
            src, dst = torch.minimum(src, dst), torch.maximum(src, dst)
        n = int(torch.maximum(src.max(), dst.max())) + 1
        units = torch.unique(torch.stack([src * n + dst, sub]), dim=1)[0]
        keys, counts = torch.unique(units, return_counts=True)
        k = int(counts.argmax())
        if int(counts[k]) > worst["count"]:
            key = int(keys[k])
            worst = {"count": int(counts[k]), "edge": [key // n, key % n], "step": t}
    return {"checked": True, "unit": "edge", "undirected": bool(event.undirected),
            "bound": int(event.occurrence), "max_per_step": worst["count"],
            "edge": worst["edge"], "step": worst["step"],
            "passed": worst["count"] <= int(event.occurrence)}


def clip_check(observer, *, tolerance: float = CLIP_TOLERANCE) -> dict[str, Any]:
    """Check 3 (see the module docstring)."""
    done = [c for c in observer.clip_checks if c.get("checked")]
    if not done:
        why = next((c["why"] for c in observer.clip_checks if "why" in c),
                   "no step was replayed")
        return {"checked": False, "why": why}
    clip = observer.engine.clip_norm
    worst = max(done, key=lambda c: c["difference"] / (tolerance * max(
        c["reference_norm"], clip)))
    passed = all(c["difference"] <= tolerance * max(c["reference_norm"], clip)
                 and c["max_clipped_norm"] <= clip * (1 + 1e-6) for c in done)
    return {"checked": True, "steps": len(done), "clip_norm": clip,
            "max_clipped_norm": max(c["max_clipped_norm"] for c in done),
            "difference": worst["difference"], "reference_norm": worst["reference_norm"],
            "engine_norm": worst["engine_norm"], "tolerance": tolerance, "passed": passed}


def event_noise_std(event, clip_norm: float) -> float | None:
    """The noise std on the clipped sum that ``event`` accounts for at clip norm
    ``clip_norm`` (``None`` for an event without one Gaussian noise multiplier)."""
    from dp_accounting import dp_event

    from gnnprivacy.accounting.events import DpGnnDpEvent, HeterPoissonDpEvent

    inner = _inner(event)
    if isinstance(inner, dp_event.PoissonSampledDpEvent):
        inner = _inner(inner.event)
    from gnnprivacy.accounting.events import EdgeSubgraphDpEvent

    if isinstance(inner, (HeterPoissonDpEvent, dp_event.GaussianDpEvent, EdgeSubgraphDpEvent)):
        return float(inner.noise_multiplier) * clip_norm
    if isinstance(inner, DpGnnDpEvent):      # sigma = lambda 2 (K + 1) C
        return float(inner.noise_multiplier) * 2 * (inner.max_degree + 1) * clip_norm
    return None


def noise_check(observer, *, alpha: float = ALPHA) -> dict[str, Any]:
    """Check 4 (see the module docstring): against the std the step event accounts for
    (the engine's own ``noise_std`` only when the event has no single multiplier)."""
    from scipy.stats import chi2

    engine = observer.engine
    accounted = event_noise_std(engine.step_event, engine.clip_norm)
    std = engine.noise_std if accounted is None else accounted
    if observer.unnoised:
        return {"checked": True, "passed": False, "noise_std": std,
                "detail": f"{len(observer.unnoised)} release(s) of parameters with no "
                          f"engine noise: {observer.unnoised[0][:3]}"}
    if not observer.noise_sq:
        return {"checked": False, "why": "no release observed (or update_clamp is set)"}
    k = len(observer.noise_sq)
    per, failed = {}, []
    for name, (ss, n) in observer.noise_sq.items():
        ratio = math.sqrt(ss / n) / std if std > 0 else math.inf
        lo = chi2.ppf(alpha / (2 * k), n) / n
        hi = chi2.ppf(1 - alpha / (2 * k), n) / n
        per[name] = ratio
        if not lo <= ratio ** 2 <= hi:
            failed.append(name)
    return {"checked": True, "noise_std": std, "engine_noise_std": engine.noise_std,
            "std_ratio": per, "false_alarm": alpha,
            "passed": not failed, **({"detail": f"noise std off on {failed}"} if failed else {})}


def release_check(observers, accountant) -> dict[str, Any]:
    """Check 2 for the engines sharing ``accountant`` (see the module docstring)."""
    events = []
    for o in observers:
        if not any(o.engine.step_event == e for e in events):
            events.append(o.engine.step_event)
    ledger = sum(entry.count for entry in accountant.ledger.entries
                 if any(entry.event == e for e in events))
    releases = sum(o.releases for o in observers)
    moved = any(o.changed_after_last for o in observers)
    detail = []
    if releases != ledger:
        detail.append(f"{releases} parameter updates released, {ledger} in the ledger")
    if moved:
        detail.append("parameters changed after the last observed update")
    return {"checked": True, "releases": releases, "ledger_steps": ledger,
            "moved_after_last": moved, "passed": not detail,
            **({"detail": "; ".join(detail)} if detail else {})}


def boundary_checks(hooks) -> tuple[list[dict], list[str]]:
    """Every check for every observed engine; returns (per-engine checks, failed names)."""
    per_engine, failed = [], []
    by_acc: dict[int, list] = {}
    for hook in hooks:
        by_acc.setdefault(id(hook.engine.accountant), []).append(hook)
    releases = {id(acc_hooks[0].engine.accountant): release_check(
        [h.observer for h in acc_hooks], acc_hooks[0].engine.accountant)
        for acc_hooks in by_acc.values()}
    for i, hook in enumerate(hooks):
        obs, event = hook.observer, hook.engine.step_event
        checks = {"sampling_rate": rate_check(obs, event), "releases":
                  releases[id(hook.engine.accountant)], "clip": clip_check(obs),
                  "noise": noise_check(obs), "occurrence": occurrence_check(obs, event)}
        per_engine.append(checks)
        failed += [f"engine {i}: {name}" + (f" ({c['detail']})" if c.get("detail") else "")
                   for name, c in checks.items() if c.get("checked") and not c["passed"]]
    return per_engine, failed
