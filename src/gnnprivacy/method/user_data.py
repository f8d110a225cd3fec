"""Prepare a user's own ``torch_geometric.data.Data`` for the runner (``gnnprivacy.train(data)``).

The user's object is never modified: a shallow copy gets the same standard form that
`gnnprivacy.datasets.load_dataset` gives the registered datasets (dense float32 ``x``, flat
int64 ``y`` (int32 or uint8 labels are widened), symmetrised coalesced ``edge_index``, ``num_classes``, ``name``) and a
`Split` built from its masks or, when it has none, from split
fractions and the seed. Validation (shapes, dtypes, masks, NaN, classes) is the runner's, the
same for every dataset (and runs here first when the data brings its own masks).
"""

from __future__ import annotations

import copy
from typing import Any

from gnnprivacy.errors import InvalidParameterError

_MASKS = ("train_mask", "val_mask", "test_mask")


def prepare_user_data(data: Any, *, name: str, split: str | None, seed: int,
                      train_frac: float | None, val_frac: float | None,
                      test_frac: float | None) -> Any:
    """A standardised shallow copy of ``data`` with a ``split`` attribute.

    Args:
        data: a ``torch_geometric.data.Data`` with ``x``, ``y``, ``edge_index`` and either
            boolean ``train_mask``/``test_mask`` (``val_mask`` optional) or no masks at all.
        name: the dataset name written to the run record.
        split: ``None``/``"public"`` (use the masks; a random split when there are none),
            ``"random"`` (draw a random split from the fractions, ignoring masks) or
            ``"inductive"`` (the masks or a random split, flagged inductive: training sees
            only the graph of training and validation nodes).
        seed, train_frac, val_frac, test_frac: the random split's seed and fractions.

    Raises:
        InvalidParameterError: ``data`` is not a PyG ``Data`` or its masks are incomplete
            (full validation follows in the runner).
    """
    import torch
    from torch_geometric.data import Data
    from torch_geometric.utils import to_undirected

    from gnnprivacy.datasets.splits import random_split, split_from_masks
    from gnnprivacy.datasets.validate import check_storage, validate_data

    if not isinstance(data, Data):
        raise InvalidParameterError("data", "a torch_geometric.data.Data (or a dataset name)",
                                    type(data).__name__)
    if split not in (None, "public", "random", "inductive"):
        raise InvalidParameterError("split", "None, 'public', 'random' or 'inductive'", split)
    out = copy.copy(data)  # shallow: new attribute stores, shared tensors
    if (isinstance(out.x, torch.Tensor) and out.x.layout != torch.strided
            and out.x.device.type != "meta"):
        out.x = out.x.to_dense()  # sparse features: the methods take dense ones
    if "num_nodes" in out._store and out._store["num_nodes"] is None:
        del out._store["num_nodes"]
    check_storage(out)  # meta tensors, other sparse tensors, num_nodes against x: before reading values
    x, y, ei = out.x, out.y, out.edge_index
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        out.x = x.to(torch.float32)
    if isinstance(y, torch.Tensor) and y.dim() == 2 and y.shape[1] == 1:
        out.y = y = y.view(-1)
    if (isinstance(y, torch.Tensor) and not y.is_floating_point() and not y.is_complex()
            and y.dtype not in (torch.bool, torch.int64)):
        out.y = y.to(torch.int64)  # int32 / uint8 labels: the losses take int64
    n = int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() >= 1 else 0
    if (isinstance(ei, torch.Tensor) and ei.dim() == 2 and ei.shape[0] == 2 and ei.numel()
            and not ei.is_floating_point() and 0 <= int(ei.min()) and int(ei.max()) < n):
        out.edge_index = to_undirected(ei.to(torch.long), num_nodes=n)
    for key in ("edge_attr", "edge_weight"):
        if key in out:  # invalid after symmetrising
            if getattr(out, key) is not None:
                import warnings

                warnings.warn(f"data.{key} is ignored: no gnnprivacy method reads edge weights or "
                              "attributes (the graph is symmetrised and every edge counts once)",
                              UserWarning, stacklevel=3)
            del out[key]
    out.name = name
    if isinstance(out.y, torch.Tensor) and out.y.numel() and not out.y.is_floating_point():
        out.num_classes = int(out.y.max()) + 1
    present = [k for k in _MASKS if getattr(out, k, None) is not None]
    fractions = (train_frac, val_frac, test_frac)
    if split == "random" or not present:
        kind = "inductive" if split == "inductive" else "random"
        split_obj = random_split(n, seed=seed, dataset=name, kind=kind, train_frac=train_frac,
                                 val_frac=val_frac, test_frac=test_frac)
        for key, mask in zip(_MASKS, split_obj.masks()):
            out[key] = torch.from_numpy(mask)
    else:
        if any(f is not None for f in fractions):
            raise InvalidParameterError(
                "train_frac, val_frac, test_frac",
                "None when the data has masks (or pass split='random' to draw a new split)",
                fractions)
        if "val_mask" not in present:
            out.val_mask = torch.zeros(n, dtype=torch.bool)
        validate_data(out)  # masks' dtypes, lengths and disjointness before reading them
        masks = [getattr(out, k) for k in _MASKS]
        split_obj = split_from_masks(*(m.cpu().numpy() for m in masks), dataset=name,
                                     kind="inductive" if split == "inductive" else "public")
    out.split = split_obj
    return out
