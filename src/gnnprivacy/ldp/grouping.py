"""Feature grouping: OR over contiguous blocks of binary columns (RGNN user-side preprocessing).

Bhaila et al., SDM 2024, Section V-A; spec 004 §3.2 and §10.1. Sparse bag-of-words vectors
are too long for GRR-FS (each report carries almost no signal per feature), so each user first
splits its ``d`` columns into contiguous blocks of ``g`` columns (the last block may be shorter)
and replaces every block by the logical OR of its entries:

```
x'_j = 1[ sum_{i in block j} x_i > 0 ],     j = 0 .. ceil(d / g) - 1.
```

Only ``g`` is public; the map is a deterministic function of the user's own vector, so it
changes nothing in the privacy analysis. Group sizes used in the paper: Citeseer 70, Cora 25,
DBLP 50, Facebook 100 (``d' = 53, 58, 33, 48``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError


def grouped_dim(num_features: int, group_size: int) -> int:
    """``d' = ceil(d / g)``."""
    d = check_int("num_features", num_features, low=1)
    g = check_int("group_size", group_size, low=1)
    return math.ceil(d / g)


def group_features(x: Tensor, group_size: int) -> Tensor:
    """OR-group contiguous blocks of ``group_size`` columns (an entry is "present" if ``> 0``).

    Args:
        x: ``(N, d)`` finite tensor (binary, counts, or real values thresholded at 0 by this
            public rule).
        group_size: block width ``g >= 1``; ``g = 1`` binarises without grouping.

    Returns:
        ``(N, ceil(d / g))`` float tensor with entries in ``{0, 1}``.

    Raises:
        InvalidParameterError: ``x`` is not 2-D, holds non-finite entries, or ``group_size``
            is not a positive integer.
    """
    g = check_int("group_size", group_size, low=1)
    if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) == 0:
        raise InvalidParameterError("x", "a 2-D (N, d) tensor with d >= 1",
                                    tuple(x.shape) if isinstance(x, Tensor) else type(x))
    if not torch.isfinite(x).all():
        raise InvalidParameterError("x", "finite features", "non-finite entries")
    n, d = x.shape
    d_out = math.ceil(d / g)
    padded = torch.zeros(n, d_out * g, dtype=torch.float32)
    padded[:, :d] = (x > 0).to(torch.float32)
    return (padded.view(n, d_out, g).amax(dim=2) > 0).to(torch.float32)


__all__ = ["group_features", "grouped_dim"]
