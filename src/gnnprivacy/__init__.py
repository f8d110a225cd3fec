"""gnnprivacy: privacy-preserving graph learning on PyTorch and PyTorch Geometric.

The public API (loaded on first use, so ``import gnnprivacy`` stays instant):

```
import gnnprivacy as gp
result = gp.train(data, method="heterpoisson", epsilon=8.0)   # a PyG Data or a dataset name
result.epsilon, result.delta, result.metrics["test_accuracy"], result.record
gp.account("dpsgd", sample_rate=0.01, noise_multiplier=1.0, steps=1000, delta=1e-5)
gp.methods(); gp.datasets(); gp.load_dataset("cora", root="...")
gp.audit("heterpoisson", "facebook", epsilon=2.0)     # empirical epsilon lower bound
gp.assess(result.record)                              # privacy report card
gp.assess(model, data, train_fn=fn, privacy=pt)       # ... of any node model
gp.save_model(model, "net.pt", privacy=pt, init={...}); gp.load_model("net.pt")
gp.tune("tune.yaml")                                  # tuning with the selection counted
gp.attack_link_stealing("cora", attack=6, defense="grid")
gp.partition("graph-folder", "shards", num_parts=4)    # per-rank shards (sharded training)
pt = gp.make_private(model, optimizer, data, sampler="heterpoisson", epsilon=8.0)
pt = gp.make_private_sharded(model, optimizer, "shards", sampler="heterpoisson", epsilon=8.0)
gp.train_sharded({"epsilon": 8.0, "steps": 500}, "shards")  # on every rank; rank 0 records
```

Sub-packages, in layers whose imports point down only (docs/architecture.md; an
import-linter contract keeps the order): ``cli`` and ``api``; ``experiments`` (sweep, tune,
reproduce); ``reporting``; ``auditing``, ``attacks``, ``defenses``; ``method`` (registry,
configs, runner); ``training``, ``transforms``, ``ldp``; ``nn``, ``sampling``,
``mechanisms``; ``accounting`` (no torch), ``datasets`` and ``records``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnprivacy._lazy import lazy_exports

__version__ = "0.1.0"

# The public API, loaded on first access. These imports are the one declaration of it: type
# checkers read them (so `gp.train` has its signature) and `lazy_exports` builds the lazy
# `__getattr__` from them.
if TYPE_CHECKING:
    from gnnprivacy.api import (MethodInfo, TrainResult, account, assess, datasets, load, methods,
                                partition, train)
    from gnnprivacy.attacks.link_stealing.method import \
        run_link_stealing as attack_link_stealing
    from gnnprivacy.auditing.api import audit
    from gnnprivacy.datasets import load_dataset, validate_data
    from gnnprivacy.experiments.linkteller_run import run_linkteller as attack_linkteller
    from gnnprivacy.experiments.reproduce import reproduce_all
    from gnnprivacy.experiments.tune import tune
    from gnnprivacy.method.sharded import run_sharded as train_sharded
    from gnnprivacy.records.record import RunRecord, read_record
    from gnnprivacy.training.private import PrivateTraining, make_private
    from gnnprivacy.training.sharded import make_private_sharded
    from gnnprivacy.training.user_model import load_model, save_model

__all__ = ["__version__", "train", "account", "methods", "datasets", "TrainResult", "MethodInfo",
           "load_dataset", "validate_data", "read_record", "RunRecord", "audit", "assess", "tune",
           "attack_link_stealing", "attack_linkteller", "make_private", "PrivateTraining",
           "load", "reproduce_all", "save_model", "load_model", "partition",
           "make_private_sharded", "train_sharded"]

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
