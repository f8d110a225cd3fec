"""gnnprivacy: privacy-preserving graph learning on PyTorch and PyTorch Geometric.

The public API (loaded on first use, so ``import gnnprivacy`` stays instant)::

    import gnnprivacy as gp
    result = gp.train(data, method="heterpoisson", epsilon=8.0)   # a PyG Data or a dataset name
    result.epsilon, result.delta, result.metrics["test_accuracy"], result.record
    gp.account("dpsgd", sample_rate=0.01, noise_multiplier=1.0, steps=1000, delta=1e-5)
    gp.methods(); gp.datasets(); gp.load_dataset("cora", root="...")
    gp.audit("heterpoisson", "facebook", epsilon=2.0)     # empirical epsilon lower bound
    gp.assess(result.record)                              # privacy report card
    gp.tune("tune.yaml")                                  # tuning with the selection counted
    gp.attack_link_stealing("cora", attack=6, defense="grid")
    pt = gp.make_private(model, optimizer, data, sampler="heterpoisson", epsilon=8.0)

Sub-packages (imports point down only): ``accounting`` (privacy events, accountants,
calibration; no torch), ``mechanisms``, ``datasets``, ``sampling``, ``nn``, ``training``,
``ldp``, ``attacks``, ``experiments`` (configs, registry, runner) and ``reporting``.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> module it lives in (imported on first access)
_API = {
    "train": "gnnprivacy.api",
    "account": "gnnprivacy.api",
    "methods": "gnnprivacy.api",
    "datasets": "gnnprivacy.api",
    "TrainResult": "gnnprivacy.api",
    "MethodInfo": "gnnprivacy.api",
    "load_dataset": "gnnprivacy.datasets",
    "validate_data": "gnnprivacy.datasets",
    "read_record": "gnnprivacy.reporting.record",
    "RunRecord": "gnnprivacy.reporting.record",
    "audit": "gnnprivacy.auditing.api",
    "assess": ("gnnprivacy.auditing.report_card", "report_card"),
    "tune": "gnnprivacy.experiments.tune",
    "attack_link_stealing": ("gnnprivacy.attacks.link_stealing.method", "run_link_stealing"),
    "attack_linkteller": ("gnnprivacy.experiments.linkteller_run", "run_linkteller"),
    "make_private": "gnnprivacy.training.private",
    "PrivateTraining": "gnnprivacy.training.private",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        module, attribute = _API[name] if isinstance(_API[name], tuple) else (_API[name], name)
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gnnprivacy' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
