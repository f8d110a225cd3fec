"""Sparse CSR feature matrices: conversion, row gather and dropout.

Bag-of-words features (Cora 1.3 % non-zero, Coauthor Physics 0.4 %) are much cheaper to
multiply, and to drop out, as sparse CSR tensors: torch's ``F.linear`` accepts a CSR input
(with gradients for the weight), so encoders whose first operation is a linear map
(`gnnprivacy.nn.encoders.SPARSE_INPUT_ENCODERS`) can run on them directly.
Torch flags CSR support as beta with a warning; these helpers silence that warning around
their own calls only.
"""

from __future__ import annotations

import contextlib
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor


@contextlib.contextmanager
def _quiet_sparse_beta():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        yield


def to_sparse_csr(x: Tensor) -> Tensor:
    """``x`` as a sparse CSR tensor (a new tensor; ``x`` is not modified)."""
    with _quiet_sparse_beta():
        return x.to_sparse_csr()


def csr_tensor(crow: Tensor, col: Tensor, values: Tensor, size: tuple[int, int]) -> Tensor:
    """A sparse CSR tensor from its parts."""
    with _quiet_sparse_beta():
        return torch.sparse_csr_tensor(crow, col, values, size, check_invariants=False)


def index_rows(t: Tensor, rows: Tensor) -> Tensor:
    """``t[rows]`` for a dense tensor or a sparse CSR matrix (vectorised CSR row gather)."""
    if t.layout != torch.sparse_csr:
        return t[rows]
    crow, col, val = t.crow_indices(), t.col_indices(), t.values()
    counts = crow[rows + 1] - crow[rows]
    new_crow = torch.zeros(rows.numel() + 1, dtype=crow.dtype, device=crow.device)
    new_crow[1:] = torch.cumsum(counts, 0)
    total = int(new_crow[-1])
    pos = (torch.repeat_interleave(crow[rows], counts)
           + torch.arange(total, device=crow.device)
           - torch.repeat_interleave(new_crow[:-1], counts))
    return csr_tensor(new_crow, col[pos], val[pos], (rows.numel(), t.shape[1]))


def feature_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout on a dense or sparse CSR feature matrix.

    For CSR input only the stored entries are dropped (zeros stay zero either way), so the
    result has the distribution of dense dropout at a cost proportional to the non-zeros.
    """
    if not training or p == 0.0:
        return x
    if x.layout != torch.sparse_csr:
        if _bulk_dense(x):
            return _dense_dropout_numpy(x, p)
        return F.dropout(x, p=p, training=True)
    values = F.dropout(x.values(), p=p, training=True)
    return csr_tensor(x.crow_indices(), x.col_indices(), values, tuple(x.shape))


#: dense CPU inputs at least this large are dropped out by `_dense_dropout_numpy`
BULK_DROPOUT_NUMEL = 1 << 20


def _bulk_dense(x: Tensor) -> bool:
    return (x.device.type == "cpu" and not x.requires_grad and x.numel() >= BULK_DROPOUT_NUMEL
            and x.dtype in (torch.float32, torch.float64))


def _dense_dropout_numpy(x: Tensor, p: float) -> Tensor:
    """Dropout of a large dense CPU feature matrix, 4-5x faster than ``F.dropout``.

    Torch's CPU Bernoulli sampler, not the multiply, is what costs on a big input (a FeatureRR
    release of Facebook, 22,470 x 4,714 dense: 1.6 s per call, 8x the ``x @ W`` after it).
    Here entry ``i`` is kept iff ``U_i >= p`` with ``U_i`` uniform from numpy's PCG64, and kept
    entries are scaled by ``1 / (1 - p)``: the distribution of ``F.dropout``. The PCG64 seed
    is drawn from torch's default generator, so ``torch.manual_seed`` (which the trainers set
    inside a forked RNG) makes it reproducible, as it does ``F.dropout``.
    """
    import numpy as np

    seed = int(torch.randint(0, 2**62, (1,)).item())
    dtype = np.float32 if x.dtype == torch.float32 else np.float64
    u = np.random.default_rng(seed).random(tuple(x.shape), dtype=dtype)
    keep = u >= p
    out = u                                                     # reuse the buffer
    np.multiply(x.detach().contiguous().numpy(), keep, out=out)
    out *= dtype(1.0 / (1.0 - p))
    return torch.from_numpy(out)


__all__ = ["csr_tensor", "feature_dropout", "index_rows", "to_sparse_csr"]
