"""Planned vs executed total of a tune config (issue 22 item 2).

Before the fix the per-trial epsilon was sized with every setting planned at the *target*
epsilon, but the adaptive defaults choose the steps from the epsilon a trial runs at, so
the trials ran other plans and the recorded total understated the executed one. This
prints, for a tune YAML (nothing is trained):

* old: the total of plans sized at the target (what the record used to say), and the total
  of the plans those trials actually ran at that per-trial epsilon;
* new: the per-trial epsilon found with each setting planned at it, and its total (what the
  record now says; it is then recomposed from the trials' executed ledgers).

    python benchmarks/tune_total.py benchmarks/tune-cora-dpmlp.yaml --data-root ../shared/datasets
"""

from __future__ import annotations

import argparse

from gnnprivacy.accounting.hparam_tuning import tuned_epsilon
from gnnprivacy.experiments.tune import (_orders, _plans_at, _trial_rdp, load_tune_spec,
                                         plan_spec, plan_trial_budget)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    spec = load_tune_spec(args.config)
    plan = plan_spec(spec, data_root=args.data_root)
    sizes = {"num_train": plan["num_train"], "num_nodes": plan["num_nodes"]}
    orders = _orders()
    score = orders / (2.0 * spec.score_noise ** 2)
    at_target = _plans_at(plan["settings"], spec.epsilon, **sizes)
    old = plan_trial_budget(at_target, epsilon=spec.epsilon, delta=plan["delta"],
                            distribution=plan["distribution"], score_std=spec.score_noise)
    ran = _plans_at(plan["settings"], old["training_epsilon"], **sizes)
    curve, _ = _trial_rdp(ran, old["training_epsilon"], plan["delta"], orders, score)
    executed = tuned_epsilon(orders, curve, plan["distribution"], plan["delta"])
    print(f"{spec.name}: target {spec.epsilon:g}, delta {plan['delta']:.3g}")
    print(f"  old: per-trial epsilon {old['training_epsilon']:.4g}, steps planned "
          f"{sorted({p[1] for p in at_target})} -> recorded total {old['total_epsilon']:.4f}; "
          f"steps run {sorted({p[1] for p in ran})} -> executed total {executed:.4f}")
    now = _plans_at(plan["settings"], plan["training_epsilon"], **sizes)
    print(f"  new: per-trial epsilon {plan['training_epsilon']:.4g}, steps "
          f"{sorted({p[1] for p in now})} -> total {plan['total_epsilon']:.4f}")


if __name__ == "__main__":
    main()
