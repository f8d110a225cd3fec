"""The training graph of the inductive setting: no test node, no edge touching one.

In the inductive setting (e.g. spec 000 §2.2, spec 003 §6.1) a model is trained on the
subgraph induced by the training and validation nodes and evaluated on the full graph.
"""

from __future__ import annotations

import torch


def inductive_train_graph(data):
    """The subgraph of ``data`` induced by its train + validation nodes, relabelled ``0..k-1``.

    Every node-level tensor (``x``, ``y``, masks, ``sens`` ...) is restricted to the kept
    nodes, edges with an endpoint outside them are dropped, and the others are relabelled.
    ``test_mask`` of the result is all ``False``. Non-tensor attributes (``name``,
    ``num_classes``, ``split``) are carried over.

    Args:
        data: a PyG ``Data`` with boolean ``train_mask``, ``val_mask`` and ``test_mask``
            (as returned by `gnnprivacy.datasets.load_dataset`). Not modified.

    Returns:
        A new ``Data`` with ``orig_id`` (int64, sorted): ``orig_id[i]`` is the id in ``data``
        of node ``i``; and ``parent_num_nodes``.
    """
    for key in ("train_mask", "val_mask", "test_mask"):
        if getattr(data, key, None) is None:
            raise ValueError(f"inductive_train_graph needs data.{key} (load the data with a split)")
    keep = (data.train_mask | data.val_mask) & ~data.test_mask
    sub = data.subgraph(keep)
    sub.orig_id = keep.nonzero().view(-1).to(torch.long)
    sub.parent_num_nodes = int(data.num_nodes)
    return sub
