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
   the last observed step, fail it. A resumed run is judged with the run that wrote its
   checkpoint: the ledger holds both halves' steps, no more, no fewer.
3. ``clip``: the engine's pre-noise sum against the per-subgraph gradients recomputed
   independently and clipped per group at the reported norms (relative tolerance 1e-3).
4. ``noise``: per parameter, the released gradient times the expected batch minus the
   pre-noise sum has the std the event accounts for (its noise multiplier times the clip
   norm; DP-GNN's ``λ · 2(K+1) · C``), not merely the engine's own ``noise_std``
   (two-sided chi-square test, Bonferroni over the parameters, total false-alarm rate
   ``alpha``).
5. ``occurrence``: the most subgraphs one node lay in, per step (and, for DP-GNN's fixed
   rows, over the run), against the bound the event assumes: 1 for Poisson-sampled
   nodes and whole graphs, ``K + 1`` for DP-GNN, for HeterPoisson 1 for a centre (with
   overlap removal) and the accounted out-degree ``D`` otherwise; for the edge unit, the most subgraphs of a
   step that hold one edge (`edge_occurrence_check`) against the event's ``occurrence``. The engine must have
   clipped as many subgraphs as the membership names, and a loader batch's rows must carry
   the training data at the ids it names (`audit_observer.rows_disagree`).
6. ``fresh_noise``: no two releases share or correlate their noise (`fresh_noise_check`):
   a reused draw is caught whatever its variance.

A check that could not be made (nothing observed) reports ``checked: False`` and does not
fail; `gnnprivacy.auditing.code.code_audit` lists every failed check and flags the run.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["boundary_checks", "clip_check", "edge_occurrence_check", "event_noise_std",
           "fresh_noise_check",
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
    centers = torch.cat([torch.unique(m.centers) for m in members])   # units per step
    out: dict[str, Any] = {"checked": True, "event_rate": q, "steps": steps}
    if centers.numel() == 0:
        return {**out, "passed": True, "units_seen": 0}
    counts = torch.bincount(centers)
    seen = counts[counts > 0].double()
    units, total = int(seen.numel()), float(seen.sum())
    out.update(units_seen=units, memberships=int(total))
    for t, m in enumerate(members):
        ids, times = torch.unique(m.centers, return_counts=True)
        limit = getattr(observer.engine, "occurrence_bound", 1)
        if times.numel() and int(times.max()) > limit:
            unit = int(ids[times.argmax()])
            return {**out, "passed": False,
                    "detail": f"step {t}: unit {unit} is the unit of {int(times.max())} "
                              f"subgraphs (sampled once, it may enter {limit})"}
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
    faults = getattr(observer, "row_faults", [])
    if faults:
        return {"checked": True, "passed": False, "detail": faults[0],
                "faulty_steps": len(faults)}
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
        bound = getattr(observer.engine, "occurrence_bound", 1)
        return {"checked": True, "bound": bound, "max_per_step": worst["count"],
                "node": worst["node"], "passed": worst["count"] <= bound}
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


def event_noise_std(event, clip_norm: float, occurrence: int = 1) -> float | None:
    """The noise std on the clipped sum that ``event`` accounts for at clip norm
    ``clip_norm`` (``None`` for an event without one Gaussian noise multiplier); a Gaussian
    event's sensitivity is ``occurrence`` clip norms (the subgraphs one unit may enter)."""
    from dp_accounting import dp_event

    from gnnprivacy.accounting.events import DpGnnDpEvent, HeterPoissonDpEvent

    inner = _inner(event)
    if isinstance(inner, dp_event.PoissonSampledDpEvent):
        inner = _inner(inner.event)
    from gnnprivacy.accounting.events import EdgeSubgraphDpEvent

    if isinstance(inner, (HeterPoissonDpEvent, EdgeSubgraphDpEvent)):
        return float(inner.noise_multiplier) * clip_norm
    if isinstance(inner, dp_event.GaussianDpEvent):
        return float(inner.noise_multiplier) * clip_norm * occurrence
    if isinstance(inner, DpGnnDpEvent):      # sigma = lambda 2 (K + 1) C
        return float(inner.noise_multiplier) * 2 * (inner.max_degree + 1) * clip_norm
    return None


def noise_check(observer, *, alpha: float = ALPHA) -> dict[str, Any]:
    """Check 4 (see the module docstring): against the std the step event accounts for
    (the engine's own ``noise_std`` only when the event has no single multiplier)."""
    from scipy.stats import chi2

    engine = observer.engine
    accounted = event_noise_std(engine.step_event, engine.clip_norm,
                                getattr(engine, "occurrence_bound", 1))
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


#: two releases whose noise at the kept coordinates is this close (relative) reused it
REUSE_TOLERANCE = 1e-6


def fresh_noise_check(observer, *, alpha: float = ALPHA) -> dict[str, Any]:
    """Check 6 (see the module docstring): every release's noise is a fresh draw.

    The noise of each release is read at fixed coordinates of every parameter (the
    released gradient times the expected batch, minus the pre-noise sum). Two releases
    whose noise on a parameter of at least 16 kept coordinates is equal (to
    `REUSE_TOLERANCE`) reused a draw; and the correlation of any two releases' noise, over
    all kept coordinates (``k``), must stay below ``z / sqrt(k)``, the two-sided normal end
    at false-alarm rate ``alpha`` split over the pairs (a correlated draw, e.g. half of the
    previous step's noise carried over, gives ``0.4`` or more against ``0.1`` for
    ``k = 2,048`` and 50 steps)."""
    from scipy.stats import norm

    samples = [s for s in observer.noise_samples if s]
    if len(samples) < 2:
        return {"checked": False, "why": "fewer than two releases with their noise observed "
                                         "(or update_clamp is set)"}
    names = sorted(set.intersection(*(set(s) for s in samples)))
    out: dict[str, Any] = {"checked": True, "releases": len(samples)}
    for name in names:
        block = torch.stack([s[name] for s in samples])
        if block.shape[1] < 16:
            continue
        gap = torch.cdist(block, block)
        size = block.norm(dim=1)
        near = gap <= REUSE_TOLERANCE * (size[:, None] + size[None, :])
        near.fill_diagonal_(False)
        if bool(near.any()):
            s, t = (int(i) for i in near.nonzero()[0])
            return {**out, "passed": False,
                    "detail": f"releases {s} and {t} carry the same noise on {name}"}
    rows = torch.stack([torch.cat([s[n] for n in names]) for s in samples])
    k, steps = rows.shape[1], rows.shape[0]
    unit = rows / rows.norm(dim=1, keepdim=True).clamp_min(1e-300)
    corr = unit @ unit.T
    corr.fill_diagonal_(0.0)
    pairs = steps * (steps - 1) / 2
    threshold = float(norm.ppf(1 - alpha / (2 * pairs))) / math.sqrt(k)
    worst = float(corr.abs().max())
    s, t = divmod(int(corr.abs().argmax()), steps)
    out.update(coordinates=k, max_correlation=worst, threshold=threshold, false_alarm=alpha,
               passed=worst <= threshold)
    if worst > threshold:
        out["detail"] = (f"the noise of releases {s} and {t} is correlated ({worst:.3f} > "
                         f"{threshold:.3f})")
    return out


def release_check(observers, accountant, saved=()) -> dict[str, Any]:
    """Check 2 for the engines sharing ``accountant`` (see the module docstring).

    A run resumed from a checkpoint carries the steps of the run that wrote it: the ledger
    must then hold the releases observed here plus the steps the checkpoint claims, the
    resume must have composed exactly those, and the claim must be what the writing run
    had executed when it wrote the checkpoint (``saved``: ``(claimed, executed)`` of every
    checkpoint written under this audit)."""
    events = []
    for o in observers:
        if not any(o.engine.step_event == e for e in events):
            events.append(o.engine.step_event)
    ledger = sum(entry.count for entry in accountant.ledger.entries
                 if any(entry.event == e for e in events))
    releases = sum(o.releases for o in observers)
    resumes = [r for o in observers for r in getattr(o, "resumes", ())]
    carried = sum(claimed for claimed, _ in resumes)
    moved = any(o.changed_after_last for o in observers)
    detail = []
    for claimed, composed in resumes:
        if composed != claimed:
            detail.append(f"a resume composed {composed} steps for a checkpoint of {claimed}")
    bad_saves = [(c, e) for c, e in saved if c != e]
    if bad_saves:
        detail.append(f"a checkpoint claims {bad_saves[0][0]} executed steps after "
                      f"{bad_saves[0][1]}")
    if resumes and not any(claimed in {c for c, e in saved if c == e}
                           for claimed, _ in resumes):
        return {"checked": False, "why": "resumed from a checkpoint that was not written "
                                         "under this audit (audit both halves in one run)"}
    if releases + carried != ledger:
        detail.append(f"{releases} parameter updates released"
                      + (f" and {carried} carried by a resume" if resumes else "")
                      + f", {ledger} in the ledger")
    if moved:
        detail.append("parameters changed after the last observed update")
    post = sum(getattr(o, "post_processed", 0) for o in observers)
    return {"checked": True, "releases": releases, "carried": carried, "ledger_steps": ledger,
            "moved_after_last": moved, "passed": not detail,
            **({"post_processing": f"{post} declared (what it read: the publication check)"}
               if post else {}),
            **({"detail": "; ".join(detail)} if detail else {})}


def boundary_checks(hooks) -> tuple[list[dict], list[str]]:
    """Every check for every observed engine; returns (per-engine checks, failed names)."""
    per_engine, failed = [], []
    by_acc: dict[int, list] = {}
    for hook in hooks:
        by_acc.setdefault(id(hook.engine.accountant), []).append(hook)
    saved = [s for hook in hooks for s in getattr(hook.observer, "saves", ())]
    releases = {id(acc_hooks[0].engine.accountant): release_check(
        [h.observer for h in acc_hooks], acc_hooks[0].engine.accountant, saved)
        for acc_hooks in by_acc.values()}
    for i, hook in enumerate(hooks):
        obs, event = hook.observer, hook.engine.step_event
        checks = {"sampling_rate": rate_check(obs, event), "releases":
                  releases[id(hook.engine.accountant)], "clip": clip_check(obs),
                  "noise": noise_check(obs), "fresh_noise": fresh_noise_check(obs),
                  "occurrence": occurrence_check(obs, event)}
        per_engine.append(checks)
        failed += [f"engine {i}: {name}" + (f" ({c['detail']})" if c.get("detail") else "")
                   for name, c in checks.items() if c.get("checked") and not c["passed"]]
    return per_engine, failed
