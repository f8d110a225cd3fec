"""The fully resolved configuration of a run: every default filled in for the data at hand.

``gnnprivacy train --print-config`` prints this, in a form ``-c`` reads back (a public split is
printed as ``split: public`` without fractions or seed: its nodes are fixed). Hyperparameters left unset are resolved the
way the method resolves them at fit time: the node-level DP methods through their preset
(`gnnprivacy.training.defaults.resolve_hparams`), and delta through the method's
registered default (``|V|^-1.1`` of the graph for heterpoisson, ``1/(10 N_train)`` for the
others). A value still ``None`` afterwards means "off" (e.g. ``clip_percentile``) or "the
dataset's own default" (e.g. ``group_size``), as the option's help says.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from gnnprivacy.method.config import RunConfig
from gnnprivacy.method.registry import get_method

#: methods whose default delta counts all nodes of the graph rather than training nodes
_DELTA_OVER_ALL_NODES = frozenset({"heterpoisson"})


def resolved_values(config: RunConfig, params: Any, data: Any) -> dict[str, Any]:
    """Flat config (run fields then method params) with the defaults resolved for ``data``."""
    from gnnprivacy.training.defaults import PAPER, graph_sizes, resolve_hparams

    spec = get_method(config.method)
    values = dataclasses.asdict(params)
    num_train = int(data.train_mask.sum())
    num_nodes = int(data.num_nodes)
    if spec.name in PAPER:
        values = resolve_hparams(spec.name, values, **graph_sizes(data))
        _fill_trainer_rules(spec.name, values, num_train=num_train, num_nodes=num_nodes)
    if "delta" in values and values["delta"] is None and spec.default_delta is not None:
        count = num_nodes if spec.name in _DELTA_OVER_ALL_NODES else num_train
        values["delta"] = float(spec.default_delta(count))
    run = dataclasses.asdict(config)
    split = getattr(data, "split", None)
    if split is not None and split.kind == "public":  # fixed nodes: no fractions or seed to give
        run.update(split="public", train_frac=None, val_frac=None, test_frac=None, split_seed=None)
    elif split is not None:  # the split actually drawn
        run.update(split=split.kind, train_frac=split.train_frac, val_frac=split.val_frac,
                   test_frac=split.test_frac, split_seed=split.seed)
    return {**run, **values}


def _fill_trainer_rules(method: str, values: dict[str, Any], *, num_train: int,
                        num_nodes: int) -> None:
    """What the node-DP trainers compute themselves from unset values (the paper preset
    leaves these to them); a test checks these against the steps a real run executes."""
    from gnnprivacy.training.node_dp.dpgnn import DEFAULT_LR

    if method == "heterpoisson":
        if values.get("q_b") is None:
            values["q_b"] = min(1.0, 4096.0 / num_nodes)
        if values.get("steps") is None:
            values["steps"] = math.ceil(values["epochs"] / values["q_b"])
    elif method == "dpgnn":
        if values.get("batch_size") is None:
            values["batch_size"] = min(10000, num_train)
        if values.get("lr") is None:
            values["lr"] = DEFAULT_LR[values["optimizer"]]
        if values.get("steps") is None:
            values["steps"] = math.ceil(values["epochs"] * num_train / values["batch_size"])
    elif method == "dpmlp" and values.get("steps") is None:
        q = min(1.0, values["batch_size"] / num_train)
        values["steps"] = math.ceil(values["epochs"] / q)
