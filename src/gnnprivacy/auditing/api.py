"""One audit interface for every private method of the registry (``gnnprivacy.audit``).

Modes:

* ``"mechanism"`` (default): the method's exact per-step mechanism (sampler law, clip,
  calibrated noise) with a white-box Dirac canary, ``runs`` runs per world, vectorised
  (`gnnprivacy.auditing.mechanism`); local-DP methods are audited exactly by
  enumeration of their randomizers' outputs (`gnnprivacy.auditing.local`).
* ``"paper"``: Algorithm 4 as printed (per-step observations, composed as GDP); heuristic.
* ``"training"``: the real trainer, trained ``runs`` times with and without an inserted
  canary node (`gnnprivacy.auditing.training`); black-box, small ``runs``.
* ``"code"``: one real training run (the runner's code path) with gradient canaries in
  every noisy update; the executed noise, clip and sampling rate, measured, give the
  epsilon the code really spends (`gnnprivacy.auditing.code`); white-box.

Every result states the claimed ε (the method's calibration target), the Clopper-Pearson
lower bound at the given confidence (its threshold chosen on held-out runs by default,
``selection``), the GDP estimate beside it (an estimate under a Gaussian trade-off
assumption, not a bound), the number of runs, and whether the bound exceeds the claim
(``violation``).
"""

from __future__ import annotations

import time
from typing import Any

from gnnprivacy._validation import check_choice, check_int, check_positive
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.auditing.mechanism import audit_phases, paper_literal_audit
from gnnprivacy.auditing.plans import GraphFacts, MechanismPlan, plan_for
from gnnprivacy.auditing.result import AuditResult, _jsonable  # noqa: F401 (re-exported)
from gnnprivacy.method.data import load_for_method as _load

__all__ = ["AuditResult", "audit", "audit_plan", "MODES"]

MODES = ("mechanism", "paper", "training", "code")
#: the most runs per world an audit takes (simulated mechanism runs; real trainings): beyond
#: them the bound no longer tightens noticeably and the work would run for hours
MAX_RUNS = 1_000_000
MAX_TRAINING_RUNS = 1_000


def audit_plan(plan: MechanismPlan, *, mode: str = "mechanism", runs: int = 10_000,
               confidence: float = 0.95, selection: str = "heldout",
               num_thresholds: int | None = 400, generator=None, dataset: str = "",
               noise_scale: float = 1.0) -> AuditResult:
    """Audit a `MechanismPlan` (mechanism-only or paper-literal mode)."""
    import numpy as np

    from gnnprivacy.random import numpy_generator

    t0 = time.perf_counter()
    if plan.local is not None:
        best = (float(plan.local[0]["epsilon"]) if plan.facts.get("combine") == "primary"
                else float(sum(r["epsilon"] for r in plan.local)))
        return AuditResult(plan.method, dataset, "exact", plan.epsilon_claimed, best, None, 0,
                           1.0, plan.delta, noise_scale=noise_scale,
                           seconds=time.perf_counter() - t0,
                           details={"components": plan.local, "facts": plan.facts,
                                    "note": "pure epsilon of the user's reports by exact "
                                            "enumeration (features + label, composed)"})
    rng = numpy_generator(generator)
    variants = {}
    for label, phases in plan.phases.items():
        if mode == "paper":
            variants[label] = paper_literal_audit(phases, runs=runs, delta=plan.delta,
                                                  insert_probability=plan.insert_probability,
                                                  confidence=confidence,
                                                  num_thresholds=num_thresholds, generator=rng)
        else:
            variants[label] = audit_phases(phases, runs=runs, delta=plan.delta,
                                           confidence=confidence, selection=selection,
                                           num_thresholds=num_thresholds, generator=rng)
    if mode == "paper":
        key = max(variants, key=lambda k: variants[k]["epsilon_estimate_gdp"])
        v = variants[key]
        return AuditResult(plan.method, dataset, "paper", plan.epsilon_claimed,
                           float(v["epsilon_lower_bound_step"]), float(v["epsilon_estimate_gdp"]),
                           runs, confidence, plan.delta, v["mia_accuracy_step"], None,
                           noise_scale, True, time.perf_counter() - t0,
                           {"variants": variants, "worst_variant": key, "facts": plan.facts,
                            "note": "epsilon_lower_bound is PER STEP (threshold chosen on the "
                                    "same samples, as printed); epsilon_estimate_gdp is the "
                                    "sqrt(T)-GDP composition (heuristic)"})
    key = max(variants, key=lambda k: variants[k]["epsilon_lower_bound"])
    v = variants[key]
    gdp = float(np.max([x["epsilon_estimate_gdp"] for x in variants.values()]))
    return AuditResult(plan.method, dataset, "mechanism", plan.epsilon_claimed,
                       float(v["epsilon_lower_bound"]), gdp, runs, confidence, plan.delta,
                       v["mia_accuracy"], v["mia_auc"], noise_scale, False,
                       time.perf_counter() - t0,
                       {"variants": variants, "worst_variant": key, "facts": plan.facts,
                        "noise_multiplier": plan.noise_multiplier, "selection": selection})


def audit(method: str, dataset: str = "csbm", *, epsilon: float | None = None,
          delta: float | None = None, mode: str | None = None, runs: int | None = None,
          data_root: str | None = None, params: dict[str, Any] | None = None,
          degrees=None, noise_scale: float = 1.0, confidence: float = 0.95,
          selection: str = "heldout", num_thresholds: int | None = 400, seed: int = 0,
          data=None) -> AuditResult:
    """Audit a registered private method on a dataset: an empirical ε lower bound.

    *Privacy*: an audit measures; it spends no budget. A lower bound above the claim
    (``violation``) is a privacy bug or a deliberately unsound mode.

    Args:
        method: registry name of a private method (``heterpoisson``, ``dpgnn``, ``dpmlp``,
            ``gap``, ``rgnn``, ``lpgnn``, ``ldp-naive``, ``heterorr`` and its feature and edge
            baselines).
        dataset: dataset name (as ``gnnprivacy train --dataset``).
        epsilon: claimed ε (the method's target; default: the method's default). For
            local methods it is the user budget ``m eps_x + eps_y``, split half features
            (``eps_x = E/(2m)``), half label (``eps_y = E/2``); for HeteroRR's feature or edge
            mechanisms it is the budget of the part they protect; default their own params.
        delta: δ (default: the method's).
        mode: ``"mechanism"`` | ``"paper"`` | ``"training"`` | ``"code"`` (see the module
            docstring).
        runs: runs per world (default 10 000; ``training`` mode: 20).
        data_root: dataset root.
        params: further method parameters (as for ``gnnprivacy train``).
        degrees: HeterPoisson canary out-degrees to audit (default: the accounted worst
            case, the graph's largest and its median out-degree).
        noise_scale: multiply the calibrated noise (``0.25``: the AU2 positive control).
        confidence: two-sided confidence (0.95).
        selection: where the distinguishing threshold is chosen: ``"heldout"`` (default:
            on other runs: ``runs`` more simulated runs per world in the mechanism modes,
            half of the runs in training mode), ``"split"`` (half of the runs) or
            ``"same"`` (on the runs the bound counts: over-claims, for comparison only).
        num_thresholds: thresholds tried.
        seed: seed of the audit's randomness.
        data: an already loaded ``Data`` (skips loading).

    Returns:
        `AuditResult`.

    Example:
        >>> from gnnprivacy.auditing import audit
        >>> result = audit("dpmlp", "csbm", epsilon=2.0, runs=2000, params={"steps": 20})
        >>> result.epsilon_lower_bound <= result.epsilon_claimed, result.violation
        (True, False)
    """
    _check_auditable(method)
    mode = audit_mode(method, mode)
    noise_scale = check_positive("noise_scale", noise_scale)
    if epsilon is not None:      # the claim as given (local methods split it further below)
        epsilon = check_positive("epsilon", epsilon)
    from gnnprivacy.auditing.plans import HETERORR_METHODS, LOCAL_METHODS

    values = dict(params or {})
    for key, given in (("epsilon", epsilon), ("delta", delta)):
        if given is not None and key in values and values[key] != given:
            raise InvalidParameterError(key, f"given once: as --{key} ({key}=) or as -p {key}=... "
                                        "(params), not both with different values",
                                        {key: given, f"params[{key!r}]": values[key]})
    max_runs = MAX_TRAINING_RUNS if mode in ("training", "code") else MAX_RUNS
    if runs is not None:
        runs = check_int("runs", runs, low=2, high=max_runs)
    if epsilon is not None and method not in (*LOCAL_METHODS, *HETERORR_METHODS):
        values["epsilon"] = epsilon
    if delta is not None:
        values["delta"] = delta
    config, method_params, loaded = _load(method, dataset, data_root, values) if data is None \
        else (*_resolve_only(method, dataset, values), data)
    if mode == "code":
        from gnnprivacy.auditing.code import audit_method_code

        run_values = {**values, "data_root": data_root, "seed": seed}
        return audit_method_code(method, dataset, run_values, data=data, seed=seed)
    if mode == "training":
        from gnnprivacy.auditing.training import training_audit

        return training_audit(method, method_params, loaded, runs=runs or 20,
                              confidence=confidence, seed=seed, dataset=dataset,
                              noise_scale=noise_scale, selection=selection)
    runs = check_int("runs", runs if runs is not None else 10_000, low=2)
    local = method in LOCAL_METHODS or method in HETERORR_METHODS
    plan = plan_for(method, method_params, GraphFacts.from_data(loaded), noise_scale=noise_scale,
                    degrees=degrees, epsilon_total=epsilon if local else None)
    return audit_plan(plan, mode=mode, runs=runs, confidence=confidence, selection=selection,
                      num_thresholds=num_thresholds, generator=seed, dataset=dataset,
                      noise_scale=noise_scale)


def audit_mode(method: str, mode: str | None) -> str:
    """The audit mode of ``method``: ``mode`` as given, or by default ``"mechanism"`` for a
    method with a canary law (`plans.PLANNERS`, the local and HeteroRR methods) and
    ``"code"`` for the others (the edge-level methods: their event has no canary law here;
    the code audit checks the executed rate, occurrence, clip, noise, releases and what
    the run publishes against the event the ledger composes).

    Raises:
        InvalidParameterError: a mode that needs a canary law for a method without one.
    """
    from gnnprivacy.auditing.plans import HETERORR_METHODS, LOCAL_METHODS, PLANNERS

    planned = method in PLANNERS or method in LOCAL_METHODS or method in HETERORR_METHODS
    if mode is None:
        return "mechanism" if planned else "code"
    mode = check_choice("mode", mode, MODES)
    if not planned and mode != "code":
        raise InvalidParameterError(
            "mode", f"'code' for {method!r} (its event has no canary law for the {mode!r} "
            "audit: the code audit checks the executed rate, occurrence, clip, noise and "
            "releases against the event the ledger composes)", mode)
    return mode


def _check_auditable(method: str) -> None:
    """A non-private method has no epsilon to audit: say so (and list those that have one)."""
    from gnnprivacy.errors import InvalidParameterError
    from gnnprivacy.method.registry import get_method, list_methods

    if not get_method(method).private:  # unknown names raise, listing the methods
        private = [m.name for m in list_methods() if m.private]
        raise InvalidParameterError(
            "method", f"a private method (one with an epsilon to audit): one of {private}",
            method)


def _resolve_only(method: str, dataset: str, values: dict):
    from gnnprivacy.method.config import resolve_config

    return resolve_config({"method": method, "dataset": dataset, **values})
