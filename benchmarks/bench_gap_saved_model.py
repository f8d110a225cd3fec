"""What GAP's saved model tells about the training nodes' features (issue 32 part 3).

Trains GAP through ``gp.train`` (its defaults, epsilon 8) on Cora's public split (140 training
nodes), saves the model and runs the hop-0 distinguisher of
tests/training/test_saved_model_scope.py on the file: for each training node, the true feature
vector against a wrong candidate (the next training node's), told apart by the saved encoder's
embedding nearest to one of the node's saved rows. Then the same on the old file layout (the
hop-0 block saved beside the aggregates, as ``features_`` was), the broken control:

    python benchmarks/bench_gap_saved_model.py --data-root data [--dataset cora] [--seed 0]

Prints ``saved file: k/n`` and ``old layout (features_): k/n``; a coin flip is n/2.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    import gnnprivacy as gp
    from gnnprivacy.training import persist

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "training"))
    from test_saved_model_scope import hop0_distinguisher

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = gp.train(args.dataset, method="gap", data_root=args.data_root, seed=args.seed,
                          split="public")
    data = result.data
    n = int(data.train_mask.sum())
    with tempfile.TemporaryDirectory() as tmp:
        path = result.save(Path(tmp) / "gap.model.pt")
        trainer, _ = persist.load_model_file(path)
        k = round(hop0_distinguisher(path, data) * n)
        print(f"{args.dataset} gap epsilon {result.epsilon:.3g}, {n} training nodes")
        print(f"saved file: {k}/{n}")
        blob = torch.load(path, weights_only=True)
        blob["tensors"]["features_"] = torch.cat([trainer._hop0(data.x.float()),
                                                  blob["tensors"].pop("aggregates_")], dim=1)
        old = Path(tmp) / "old.model.pt"
        torch.save(blob, old)
        k_old = round(hop0_distinguisher(old, data) * n)
        print(f"old layout (features_): {k_old}/{n}")


if __name__ == "__main__":
    main()
