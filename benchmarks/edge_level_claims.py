"""Edge-level DP node classification against its anchors, with the attacks as the judge
(issue 46 acceptance): accuracy and the attacks' AUCs per (dataset, method, epsilon, seed).

Run (resumable: a rerun skips the cells its results file holds)::

    OMP_NUM_THREADS=1 nice .venv/bin/python benchmarks/edge_level_claims.py \\
        --datasets facebook,computers --epsilons 1,8 --seeds 0,1,2 \\
        --out runs/edge_level/claims.jsonl
    .venv/bin/python benchmarks/edge_level_claims.py --summary runs/edge_level/claims.jsonl

Methods (``--methods``), each on the dataset's default split (``gp.load_dataset`` without
``split``: a random split seeded by the run seed on Facebook and Computers, the public split
of 140 training nodes on Cora):

* ``edge-dp``: make_private(sampler="edges") with edge-private predictions (the library's
  ``edge-dp`` method, through `gnnprivacy.train`);
* ``edge-dp-open``: the same training, predictions on the true graph (inference
  unprotected: the control that shows what the release protects);
* ``gap-edge``: GAP's edge-level mode; ``edge-rand``, ``edge-lapgraph``: a GCN on the
  EdgeRand / LapGraph graph (LinkTeller's baselines; the library's methods);
* ``gcn``: non-private GCN; ``mlp``: the features-only control (a model that never saw an
  edge); ``dpgnn``: node-level DP at the same epsilon (unit node).

Attacks on each released model's predictions: LinkTeller (500 targets among the endpoints of
edges; every edge private) and He et al.'s Attack-0 (posterior correlation over 2,000 edges
and as many non-edges). A cell the library refuses (EdgeRand's output beyond ``max_edges``
at a small epsilon on a large graph) is recorded with its one-line reason.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from _cli import (append_row, float_list, int_list, name_list, read_rows, resume_rows,
                  run_or_summary)

METHODS = ("edge-dp", "edge-dp-open", "gap-edge", "edge-rand", "edge-lapgraph", "gcn", "mlp")
PRIVATE = {"edge-dp", "edge-dp-open", "gap-edge", "edge-rand", "edge-lapgraph", "dpgnn"}


def _with_x(data, x):
    from torch_geometric.data import Data

    return Data(x=x, edge_index=data.edge_index, y=data.y, num_nodes=int(data.num_nodes))


def _victim(method, data, eps, seed):
    """``(predict(x) -> logits, test accuracy, epsilon, info)`` of one trained model."""
    import torch

    import gnnprivacy as gp

    if method in ("edge-rand", "edge-lapgraph"):
        from gnnprivacy.method.builtin.heterorr import EdgeParams, fit_release, train_gcn
        from gnnprivacy.method.context import RunContext

        params = EdgeParams(eps_e=eps)
        ctx = RunContext(config=None, params=params, data=data, seed=seed)
        rel = fit_release(ctx, "clean", "edgerand" if method == "edge-rand" else "lapgraph")
        trainer = train_gcn(rel.data, params, generator=ctx.torch_generator("train"))
        graph = rel.data
        acc = trainer.evaluate(graph, "test_mask")["accuracy"]
        return (lambda x: trainer.predict_logits(_with_x(graph, x)), acc,
                rel.privacy["epsilon_edges"],
                {"released_edges": int(graph.edge_index.shape[1]) // 2})
    options = {} if method in ("gcn", "mlp") else {"epsilon": eps}
    name = {"edge-dp-open": "edge-dp"}.get(method, method)
    if method == "edge-dp-open":
        options["inference"] = "unprotected"
    result = gp.train(data, method=name, seed=seed, **options)
    model = result.model
    acc = result.metrics["test_accuracy"]
    if method in ("edge-dp", "edge-dp-open"):
        return (lambda x: model.predict_logits(_with_x(data, x)), acc, result.epsilon,
                {"steps": result.record.info.get("steps")})
    return (lambda x: model.predict_logits(_with_x(data, x)), acc, result.epsilon, {})


def _attacks(predict, data, seed, targets):
    import torch

    from gnnprivacy.attacks.linkteller import linkteller_attack
    from gnnprivacy.auditing.model_card import link_stealing_section

    with torch.no_grad():
        post = torch.softmax(predict(data.x), 1).numpy()
    ls = link_stealing_section(post, data, seed=seed, n_hop=None, n_boot=100)
    ei = data.edge_index.numpy()
    lt = linkteller_attack(lambda x: predict(x).detach(), data.x.clone(),
                           num_nodes=int(data.num_nodes), private_edges=ei[:, ei[0] < ei[1]],
                           public_edges=np.zeros((2, 0), np.int64), n_targets=targets,
                           generator=np.random.default_rng(seed))
    return {"linkteller_auc": lt["auc"], "linkteller_positives": lt["num_positives"],
            "link_stealing_auc": ls["auc"]}


def run(args) -> None:
    import gnnprivacy as gp

    out, done = resume_rows(args.out, ("dataset", "method", "epsilon", "seed"))
    for dataset in args.datasets:
        data = None
        for seed in args.seeds:
            for eps in args.epsilons:
                for method in args.methods:
                    cell_eps = eps if method in PRIVATE else None
                    if (dataset, method, cell_eps, seed) in done:
                        continue
                    if data is None or data.split.seed != seed:
                        data = gp.load_dataset(dataset, root=args.root, seed=seed)
                    row = {"dataset": dataset, "method": method, "epsilon": cell_eps,
                           "seed": seed}
                    t0 = time.perf_counter()
                    try:
                        predict, acc, spent, info = _victim(method, data, eps, seed)
                    except Exception as exc:          # a refusal is a result: record it
                        from gnnprivacy.errors import GnnPrivacyError

                        if not isinstance(exc, GnnPrivacyError):
                            raise
                        append_row(out, {**row, "refused": str(exc).splitlines()[0]})
                        done.add((dataset, method, cell_eps, seed))
                        continue
                    row.update(test_accuracy=acc, epsilon_spent=spent, **info,
                               train_seconds=round(time.perf_counter() - t0, 1))
                    if args.attacks and (cell_eps is None or not args.attack_epsilons
                                         or cell_eps in args.attack_epsilons):
                        t1 = time.perf_counter()
                        row.update(_attacks(predict, data, seed, args.targets),
                                   attack_seconds=round(time.perf_counter() - t1, 1))
                    append_row(out, row)
                    done.add((dataset, method, cell_eps, seed))


def _ci(values):
    """Mean and a 95 % t interval half-width over seeds."""
    from scipy import stats

    v = np.asarray(values, float)
    if v.size < 2:
        return float(v.mean()), float("nan")
    return float(v.mean()), float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1)
                                  / math.sqrt(v.size))


def summary(paths) -> None:
    rows = read_rows(paths)
    for dataset in sorted({r["dataset"] for r in rows}):
        print(f"\n## {dataset}: mean +- 95% t-interval half-width over seeds (n)\n")
        print("| method | epsilon | test accuracy | LinkTeller AUC | link stealing AUC | "
              "n |")
        print("|---|---|---|---|---|---|")
        keys = sorted({(r["method"], r["epsilon"]) for r in rows if r["dataset"] == dataset},
                      key=lambda k: (METHODS.index(k[0]) if k[0] in METHODS else 99,
                                     k[1] or 0))
        for method, eps in keys:
            sub = [r for r in rows if r["dataset"] == dataset and r["method"] == method
                   and r["epsilon"] == eps]
            refused = [r for r in sub if "refused" in r]
            ok = [r for r in sub if "refused" not in r]
            shown = "-" if eps is None else f"{eps:g}"
            if not ok:
                print(f"| {method} | {shown} | refused: {refused[0]['refused'][:90]} | | | "
                      f"{len(refused)} |")
                continue
            cells = []
            for key in ("test_accuracy", "linkteller_auc", "link_stealing_auc"):
                vals = [r[key] for r in ok if r.get(key) is not None]
                if not vals:
                    cells.append("-")
                    continue
                m, h = _ci(vals)
                cells.append(f"{m:.3f} +- {h:.3f}")
            print(f"| {method} | {shown} | " + " | ".join(cells) + f" | {len(ok)} |")
        _paired(rows, dataset)


#: the library's edge-level method against the anchors and the features-only control
PAIRED = ("edge-dp", ("edge-rand", "edge-lapgraph", "gap-edge", "mlp"))


def paired_differences(rows, dataset: str) -> list[dict]:
    """``edge-dp`` minus each anchor in test accuracy, paired by seed (both ran on the
    seed's split), at each epsilon both have: mean, 95 % t half-width, seeds, and whether
    the interval lies above zero (``beats``). The features-only ``mlp`` pairs with every
    epsilon."""
    ours, anchors = PAIRED
    acc = {(r["method"], r["epsilon"], r["seed"]): r["test_accuracy"] for r in rows
           if r["dataset"] == dataset and r.get("test_accuracy") is not None}
    out = []
    for eps in sorted({e for (m, e, _) in acc if m == ours}):
        for anchor in anchors:
            anchor_eps = None if anchor == "mlp" else eps
            seeds = sorted(s for (m, e, s) in acc if m == ours and e == eps
                           and (anchor, anchor_eps, s) in acc)
            if not seeds:
                continue
            diff = [acc[(ours, eps, s)] - acc[(anchor, anchor_eps, s)] for s in seeds]
            m, h = _ci(diff)
            out.append({"epsilon": eps, "anchor": anchor, "mean": m, "half_width": h,
                        "n": len(seeds), "beats": bool(len(seeds) >= 2 and m - h > 0)})
    return out


def _paired(rows, dataset: str) -> None:
    diffs = paired_differences(rows, dataset)
    if not diffs:
        return
    print(f"\n{PAIRED[0]} minus each anchor, test accuracy paired by seed "
          "(mean +- 95% t half-width):\n")
    print("| epsilon | anchor | difference | n | interval above 0 |")
    print("|---|---|---|---|---|")
    for d in diffs:
        print(f"| {d['epsilon']:g} | {d['anchor']} | {d['mean']:+.3f} +- "
              f"{d['half_width']:.3f} | {d['n']} | {'yes' if d['beats'] else 'no'} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=name_list, default="facebook,computers")
    p.add_argument("--epsilons", type=float_list, default="1,8")
    p.add_argument("--seeds", type=int_list, default="0,1,2")
    p.add_argument("--methods", type=name_list, default=",".join(METHODS))
    p.add_argument("--root", default="/work/shared/datasets")
    p.add_argument("--targets", type=int, default=500, help="LinkTeller targets")
    p.add_argument("--no-attacks", dest="attacks", action="store_false")
    p.add_argument("--attack-epsilons", type=float_list, default=None,
                   help="attack the private models at these epsilons only (default: all)")
    p.add_argument("--out")
    p.add_argument("--summary", nargs="+")
    run_or_summary(p, run, summary)


if __name__ == "__main__":
    main()
