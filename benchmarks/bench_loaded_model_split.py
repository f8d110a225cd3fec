"""A saved HeterPoisson model predicting on a freshly loaded graph with another split (issue 38
item 4): how many predictions differ from ``gnnprivacy predict`` (which rebuilds the run's own
split), with the run's training set kept in the model (now) and with the graph's split used as
the private set (before: ``train_mask_`` removed).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_loaded_model_split.py [--dataset cora]
        [--data-root data] [--epochs 5]

Measured (Cora, 80/20, epochs 5, this machine, 2026-11-27): before 12.962 %, after 0.000 %.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import gnnprivacy as gp
from gnnprivacy.cli.predict_cmd import load_prediction_graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--data-root", default="data")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    split = {"split": "random", "train_frac": 0.8, "val_frac": 0.0, "test_frac": 0.2}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp.train(args.dataset, method="heterpoisson", seed=0, data_root=args.data_root,
                 runs_dir=tmp, epochs=args.epochs, **split)
        loaded = gp.load(str(next(Path(tmp).glob("*.model.pt"))))
        cli = loaded.predict(load_prediction_graph(loaded.record, None, args.data_root)).argmax(1)
        fresh = gp.load_dataset(args.dataset, root=args.data_root, seed=1, **split)
        after = loaded.predict(fresh).argmax(1)
        del loaded.model.train_mask_                 # the graph's own split as the private set
        before = loaded.predict(fresh).argmax(1)
    print(f"{args.dataset}: predictions differing from `gnnprivacy predict` on a fresh load "
          f"with another split: before {(before != cli).float().mean():.3%}, "
          f"after {(after != cli).float().mean():.3%}")


if __name__ == "__main__":
    main()
