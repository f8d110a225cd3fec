"""HeterPoisson's auto preset against the rule it replaced, side by side (issue 27).

The rule before: ``q_b = min(0.3, 4096/|V|)`` raised to 512 stars, ``T`` from 25 epochs clamped
to [100, 2000] and lowered until the per-coordinate noise ``nu(T) <= 0.05``. The rule now
(`gnnprivacy.training.defaults`): no 0.3 cap, and ``T`` lowered until the noise *norm* on the
averaged update, ``sqrt(P) nu(T)``, is at most 0.25 of the clip bound (P: the star model's
parameter count), not below 50 steps.

Prints, per dataset and epsilon, the mean test accuracy (random 80/20 split, ``--seeds``) of
heterpoisson under both rules and of dpmlp at its defaults, the resolved ``q_b`` and ``T`` and
the difference new - old:

    python benchmarks/bench_heterpoisson_rule.py --data-root data \\
        [--datasets citeseer,cs,computers] [--epsilons 8,2] [--seeds 2]

``cora-public`` runs Cora on its public split (140 training nodes). ``--validation`` scores the
choice on validation data instead: a random 60/20/20 split and the mean *validation* accuracy
(how a default should be chosen; the 80/20 test figures are the reproduction protocol's).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

from _cli import float_list, name_list


def old_rule(num_nodes: int, num_train: int, epsilon: float) -> tuple[float, int]:
    """The auto rule before issue 27 (``q_b`` capped at 0.3, per-coordinate noise only)."""
    from gnnprivacy.training import defaults as d

    q_b = min(1.0, max(min(0.3, 4096.0 / num_nodes), d.MIN_BATCH_HETERPOISSON / num_train))
    steps = d.adaptive_steps(num_train, q_b * num_train, epsilon=epsilon,
                             delta=float(num_nodes) ** -1.1)
    return q_b, min(steps, d.MAX_STEPS_HETERPOISSON)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--datasets", type=name_list, default="citeseer,cora-public,cs,computers,photo,facebook,twitch-de")
    parser.add_argument("--epsilons", type=float_list, default="8,2")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--validation", action="store_true",
                        help="60/20/20 split, mean validation accuracy (not test)")
    args = parser.parse_args()
    score = "val_accuracy" if args.validation else "test_accuracy"
    warnings.filterwarnings("ignore")
    import numpy as np

    import gnnprivacy as gp

    print(f"mean {score} (%)")
    print(f"{'dataset':12s} {'eps':>4s} {'old':>6s} {'new':>6s} {'new-old':>8s} {'dpmlp':>6s}  "
          "old (q_b, T) -> new (q_b, T)")
    t0 = time.monotonic()
    for name in args.datasets:
        public = name == "cora-public"
        dataset = "cora" if public else name
        split = ({} if public else
                 dict(split="random", train_frac=0.6, val_frac=0.2, test_frac=0.2) if args.validation else
                 dict(split="random", train_frac=0.8, val_frac=0.0, test_frac=0.2))
        data = gp.load_dataset(dataset, root=args.data_root, **split)
        num_train = int(data.train_mask.sum())
        for eps in args.epsilons:
            q_old, t_old = old_rule(data.num_nodes, num_train, eps)

            def mean(method, **kw):
                recs = [gp.train(dataset, method=method, seed=s, epsilon=eps, progress=False,
                                 data_root=args.data_root, **split, **kw)
                        for s in range(args.seeds)]
                hp = recs[-1].record.info.get("hparams", {})
                return 100 * float(np.mean([r.metrics[score] for r in recs])), hp

            old, _ = mean("heterpoisson", q_b=q_old, steps=t_old)
            new, hp = mean("heterpoisson")
            base, _ = mean("dpmlp")
            print(f"{name:12s} {eps:4g} {old:6.1f} {new:6.1f} {new - old:+8.1f} {base:6.1f}  "
                  f"({q_old:.3f}, {t_old}) -> ({hp['q_b']:.3f}, {hp['steps']})", flush=True)
    print(f"({math.ceil(time.monotonic() - t0)} s)")


if __name__ == "__main__":
    from gnnprivacy.errors import GnnPrivacyError

    try:
        main()
    except GnnPrivacyError as exc:  # an unknown or missing dataset: one line, no traceback
        raise SystemExit(f"error: {exc}") from None
