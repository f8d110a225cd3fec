"""The white-box gradient-observation adversary (spec 000 §3.7), scored like the membership
attacks: it sees every noisy gradient of a method's audit plan and scores each run with the
Neyman-Pearson statistic of the canary (mechanism-only simulation).

It lives with the audits because it runs on their plans (`gnnprivacy.auditing.plans`) and
their simulator (`gnnprivacy.auditing.mechanism`); the privacy report card runs it beside
LiRA (`gnnprivacy.attacks.membership`).
"""

from __future__ import annotations

import numpy as np

from gnnprivacy.attacks.membership import _summarise
from gnnprivacy.auditing.mechanism import simulate_statistics
from gnnprivacy.auditing.plans import GraphFacts, plan_for
from gnnprivacy.method.data import load_for_method as _load

__all__ = ["gradient_observation_attack"]


def gradient_observation_attack(method: str, dataset: str = "csbm", *, epsilon: float | None = None,
                                runs: int = 10_000, seed: int = 0, n_boot: int = 200,
                                **audit_kwargs) -> dict:
    """The white-box adversary of spec 000 §3.7: sees every noisy gradient, scores each run
    with the Neyman-Pearson statistic of the canary (mechanism-only simulation)."""
    values = dict(audit_kwargs.pop("params", None) or {})
    if epsilon is not None:
        values["epsilon"] = epsilon
    _, params, data = _load(method, dataset, audit_kwargs.pop("data_root", None), values)
    plan = plan_for(method, params, GraphFacts.from_data(data), **audit_kwargs)
    label = next(iter(plan.phases))
    member, nonmember = simulate_statistics(plan.phases[label], runs, generator=seed)
    scores = np.concatenate([member, nonmember])
    labels = np.concatenate([np.ones(runs, int), np.zeros(runs, int)])
    out = _summarise(scores, labels, seed, n_boot)
    out.update(attack="gradient-observation", variant=label, runs=runs,
               epsilon_claimed=plan.epsilon_claimed)
    return out
