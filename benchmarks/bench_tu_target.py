"""What GRID's target GCN learns on the merged TU graphs (spec 003 §6.1-6.2), and why the
reproduction's "Model acc." cells on ENZYMES and AIDS stand where they do.

The link-stealing pipeline's target (`run_experiment`, model ``gcn``: 2 layers, 16 units,
dropout 0.5, Adam 0.01, weight decay 5e-4, early stopping on validation) trains on D1 of the
merged graph, each node labelled with its graph's class. This prints its *training* and test
accuracy on D1 for both readings of the D1 split (``component``: whole graphs, the default;
``induced``: uniform nodes, the literal reading) and two feature maps (the loader's raw
features, and each column standardised on D1's training rows), beside the majority class of
the test nodes. A model that cannot fit its own training nodes cannot reach a higher test
accuracy; the paper reports 69.0 (ENZYMES) and 68.5 (AIDS) for its GCN.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_tu_target.py --data-root DATA [--datasets enzymes,aids] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch

from _cli import int_list, name_list
from gnnprivacy.attacks.link_stealing.pipeline import TARGET_HPARAMS, LinkStealingSettings
from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.link_splits import attack_splits
from gnnprivacy.training.nonprivate import FullBatchTrainer


def _acc(trainer, part, mask) -> float:
    return trainer.evaluate(part, mask)["accuracy"]


def measure(data, split: str, features: str, seed: int) -> dict[str, float]:
    s = attack_splits(data, seed=seed, split=split, setting="transductive")
    part = s.d1.to_data()
    x = torch.as_tensor(part.x).float()
    train = torch.as_tensor(part.train_mask)
    if features == "standardized":
        x = (x - x[train].mean(0)) / (x[train].std(0) + 1e-6)
    part.x = x
    st = LinkStealingSettings()
    hp = dict(TARGET_HPARAMS["gcn"])
    model = FullBatchTrainer("gcn", hidden_channels=hp["hidden_channels"], dropout=hp["dropout"],
                             lr=hp["lr"], weight_decay=hp["weight_decay"], epochs=st.epochs,
                             patience=st.patience, normalize_features=False, generator=seed).fit(part)
    test = torch.as_tensor(part.test_mask)
    y = torch.as_tensor(part.y)[test]
    return {"train": _acc(model, part, "train_mask"), "test": _acc(model, part, "test_mask"),
            "majority": float(torch.bincount(y).max()) / int(test.sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--datasets", type=name_list, default="enzymes,aids")
    ap.add_argument("--seeds", type=int_list, default="0,1,2")
    args = ap.parse_args()
    seeds = args.seeds
    print(f"{'dataset':<9}{'D1 split':<11}{'features':<14}{'train acc':>10}{'test acc':>10}{'majority':>10}"
          f"   (mean over seeds {seeds})")
    for name in args.datasets:
        data = load_dataset(name, root=args.data_root)
        for split in ("component", "induced"):
            for features in ("raw", "standardized"):
                rows = [measure(data, split, features, s) for s in seeds]
                mean = {k: 100 * statistics.mean(r[k] for r in rows) for k in rows[0]}
                print(f"{name:<9}{split:<11}{features:<14}{mean['train']:>10.1f}{mean['test']:>10.1f}"
                      f"{mean['majority']:>10.1f}", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
