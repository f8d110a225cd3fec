"""The data a run configuration names: its split kind and the loaded dataset.

Drivers, audits and attacks load a method's data through here, so none of them needs the runner.
"""

from __future__ import annotations

from typing import Any

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.method.config import parse_dataset_args, resolve_config

__all__ = ["split_kind", "load_run_data", "load_for_method"]


def split_kind(config) -> str:
    """The split ``config`` draws: its ``split``, else the dataset's default (``public`` for
    Cora/CiteSeer unless fractions are given, else ``random``)."""
    from gnnprivacy.datasets.load import _split_kind
    from gnnprivacy.datasets.registry import dataset_info

    return _split_kind(dataset_info(config.dataset), config.split,
                       (config.train_frac, config.val_frac, config.test_frac))


def load_run_data(config):
    """Load the dataset and split named by ``config`` (a `RunConfig`).

    Raises:
        InvalidParameterError: ``split_seed`` with a public split (whose nodes are fixed, so the
            seed would be silently ignored), besides the loader's errors.
    """
    from gnnprivacy.datasets import load_dataset

    if config.task == "graph":      # a GraphSet: the graphs and a stratified split
        from gnnprivacy.datasets.tu_graphs import load_graph_dataset

        return load_graph_dataset(config.dataset, root=config.data_root,
                                  seed=config.seed if config.split_seed is None
                                  else config.split_seed, train_frac=config.train_frac,
                                  val_frac=config.val_frac, test_frac=config.test_frac)
    if config.split_seed is not None and split_kind(config) == "public":
        raise InvalidParameterError(
            "split_seed", f"unset with the public split of {config.dataset} (its nodes are fixed; "
            "add --split random to draw a split with this seed)", config.split_seed)

    return load_dataset(
        config.dataset, root=config.data_root, split=config.split,
        seed=config.seed if config.split_seed is None else config.split_seed,
        train_frac=config.train_frac, val_frac=config.val_frac, test_frac=config.test_frac,
        **parse_dataset_args(config.dataset_args))


def load_for_method(method: str, dataset: str, data_root, values: dict[str, Any]):
    """Resolve ``method`` on ``dataset`` with ``values`` and load its data:
    ``(config, params, data)``."""
    config, params = resolve_config({"method": method, "dataset": dataset,
                                     "data_root": data_root, **values})
    return config, params, load_run_data(config)
