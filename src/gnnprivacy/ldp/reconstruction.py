"""RGNN's server-side reconstructions: node features (Algorithm 1) and labels (Algorithm 2).

Bhaila et al., "Local Differential Privacy in Graph Neural Networks: a Reconstruction
Approach", SDM 2024, Section IV-A/B; spec 004 §4-6. The server holds only the users' reports.
For every node ``v`` it estimates the distribution of a feature (or of the label) in ``v``'s
``K``-hop neighbourhood by *frequency estimation* on the mean-propagated one-hot reports:

```
lambda_v = (Â^K onehot(X'))_v,      Â = (D + I)^{-1} (A + I)    (synchronous hops)
```

* features (GRR-FS, eq. 5):
  ``pi_v = d lambda_v / (m (p - q)) + (m - d - m gamma q) / (m gamma (p - q))``, computed by
  `gnnprivacy.mechanisms.grr_fs_frequencies`. For a binary feature the output is the
  soft estimate ``pi_{v,1}`` (default, unclipped, as in the authors' code) or
  the hard argmax; for ``gamma > 2`` the argmax index (code), a one-hot, or the soft vector.
* labels (GRR, eq. 14): the labelled rows carry ``onehot(y'_v)``, all other rows are zero
  (masked propagation), ``pi_v = P^{-1} lambda_v`` by
  `gnnprivacy.mechanisms.grr_frequencies`; negative entries are set to ``1e-5``, rows
  renormalised, and the labelled node gets ``argmax_j pi_{v,j}`` (ties: smallest ``j``).

``K <= 0`` skips a reconstruction (the reports are used as they are). The work is sparse:
``K`` products of the ``(N, N)`` sparse ``Â`` with an ``(N, F)`` dense matrix, ``O(K |E| F)``.

Structural fact (spec §4.3): both estimators are increasing affine maps with one slope per
row, so ``argmax_j pi_{v,j} = argmax_j lambda_{v,j}``: the hard outputs are a ``K``-hop
majority vote of the noisy reports; estimation only matters for the soft features and the
LLP bag targets.

Privacy: post-processing of the reports; no event.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from gnnprivacy._validation import check_choice, check_int, check_positive
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.llp import CLIP_VALUE, clip_renormalize
from gnnprivacy.ldp.propagation import propagate_snapshots
from gnnprivacy.mechanisms import grr_frequencies, grr_fs_frequencies

BINARY_OUTPUTS = ("soft", "hard")
CATEGORICAL_OUTPUTS = ("index", "onehot", "soft_vector")


def _domain_sizes(domain_sizes, d: int) -> Tensor:
    if domain_sizes is None:
        return torch.full((d,), 2, dtype=torch.long)
    sizes = torch.as_tensor(domain_sizes, dtype=torch.long).view(-1)
    if sizes.numel() != d or (sizes < 2).any():
        raise InvalidParameterError("domain_sizes", f"{d} domain sizes >= 2", domain_sizes)
    return sizes


def _check_reports(x_reports: Tensor, sizes: Tensor) -> Tensor:
    if not isinstance(x_reports, Tensor) or x_reports.dim() != 2:
        raise InvalidParameterError("x_reports", "a 2-D (N, d) tensor of reported categories",
                                    tuple(x_reports.shape) if isinstance(x_reports, Tensor)
                                    else type(x_reports))
    rep = x_reports.long()
    if (rep != x_reports).any() or (rep < 0).any() or (rep >= sizes).any():
        raise InvalidParameterError("x_reports", "integers with column i in [0, domain_sizes[i])",
                                    "values outside the domains")
    return rep


def _feature_output(pi: Tensor, gamma: int, binary_output: str, categorical_output: str) -> Tensor:
    """Map ``(N, f, gamma)`` estimates to output columns (``(N, f)`` or ``(N, f * gamma)``)."""
    if gamma == 2:
        return pi[..., 1] if binary_output == "soft" else pi.argmax(dim=-1).to(pi.dtype)
    if categorical_output == "index":
        return pi.argmax(dim=-1).to(pi.dtype)
    if categorical_output == "onehot":
        pi = torch.nn.functional.one_hot(pi.argmax(dim=-1), gamma).to(pi.dtype)
    return pi.reshape(pi.size(0), -1)


def reconstruct_features_for_steps(adj: Tensor, x_reports: Tensor, *, feature_epsilon: float,
                                   m: int, steps: Iterable[int], domain_sizes=None,
                                   binary_output: str = "soft",
                                   categorical_output: str = "index") -> dict[int, Tensor]:
    """Algorithm 1 (``f_X``) for several hop counts at once, sharing the propagation.

    Args:
        adj: ``Â`` from `gnnprivacy.ldp.propagation.mean_adjacency`.
        x_reports: ``(N, d)`` GRR-FS reports (integers, column ``i`` in ``[0, gamma_i)``).
        feature_epsilon: the per-sampled-feature budget ``eps_x`` the users applied.
        m: features sampled per user (``1 <= m <= d``).
        steps: hop counts ``K``; ``K <= 0`` returns the reports as floats (no reconstruction).
        domain_sizes: ``(d,)`` domain sizes ``gamma_i`` (default: all binary).
        binary_output: ``"soft"`` (``pi_{v,1}``, unclipped) or ``"hard"`` (argmax).
        categorical_output: for ``gamma > 2``: ``"index"``, ``"onehot"`` or ``"soft_vector"``.

    Returns:
        ``{K: features}``; features are float32, one column per binary feature (and per
        ``"index"`` feature), ``gamma_i`` columns otherwise, in feature order.
    """
    check_choice("binary_output", binary_output, BINARY_OUTPUTS)
    check_choice("categorical_output", categorical_output, CATEGORICAL_OUTPUTS)
    check_positive("feature_epsilon", feature_epsilon)
    d = x_reports.size(1) if isinstance(x_reports, Tensor) and x_reports.dim() == 2 else 0
    sizes = _domain_sizes(domain_sizes, d)
    rep = _check_reports(x_reports, sizes)
    check_int("m", m, low=1, high=d)
    steps = sorted({check_int("steps", k) for k in steps})
    out = {k: rep.to(torch.float32) for k in steps if k <= 0}
    positive = [k for k in steps if k > 0]
    if not positive:
        return out
    onehot = torch.cat([torch.nn.functional.one_hot(rep[:, i], int(g)).to(torch.float32)
                        for i, g in enumerate(sizes.tolist())], dim=1)
    offsets = torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.long), sizes]), 0)
    groups = {g: (sizes == g).nonzero().view(-1) for g in sorted(set(sizes.tolist()))}
    for k, lam in propagate_snapshots(adj, onehot, positive).items():
        cols: list[Tensor | None] = [None] * d
        for g, feats in groups.items():  # one vectorised estimate per domain size
            idx = (offsets[feats].view(-1, 1) + torch.arange(g)).view(-1)
            counts = lam[:, idx].clamp_min(0).view(-1, feats.numel(), g)
            pi = grr_fs_frequencies(counts, feature_epsilon=feature_epsilon, m=m,
                                    num_features=d, domain_size=g, normalize=False)
            block = _feature_output(pi, g, binary_output, categorical_output)
            width = block.size(1) // feats.numel()
            for j, f in enumerate(feats.tolist()):
                cols[f] = block[:, j * width:(j + 1) * width]
        out[k] = torch.cat(cols, dim=1).to(torch.float32)
    return out


def reconstruct_features(adj: Tensor, x_reports: Tensor, *, feature_epsilon: float, m: int,
                         steps: int, domain_sizes=None, binary_output: str = "soft",
                         categorical_output: str = "index") -> Tensor:
    """Algorithm 1 (``f_X``) with ``K_x = steps``; see `reconstruct_features_for_steps`."""
    return reconstruct_features_for_steps(
        adj, x_reports, feature_epsilon=feature_epsilon, m=m, steps=[steps],
        domain_sizes=domain_sizes, binary_output=binary_output,
        categorical_output=categorical_output)[steps]


def check_label_reports(y_reports: Tensor, labeled_mask: Tensor, num_classes: int) -> Tensor:
    """Labels of the labelled nodes must lie in ``[0, num_classes)``; returns them as int64."""
    c = check_int("num_classes", num_classes, low=2)
    if not isinstance(y_reports, Tensor) or y_reports.shape != labeled_mask.shape:
        raise InvalidParameterError("y_reports", f"a tensor of shape {tuple(labeled_mask.shape)}",
                                    tuple(y_reports.shape) if isinstance(y_reports, Tensor)
                                    else type(y_reports))
    lab = y_reports[labeled_mask]
    out_of_range = lab.numel() and (int(lab.min()) < 0 or int(lab.max()) >= c)
    if torch.is_floating_point(lab) or out_of_range:
        raise InvalidParameterError("y_reports", f"integer labels in [0, {c}) on labelled nodes",
                                    f"values in [{lab.min().item()}, {lab.max().item()}]"
                                    if lab.numel() else lab.dtype)
    return y_reports.long()


def label_estimates_for_steps(adj: Tensor, y_reports: Tensor, labeled_mask: Tensor, *,
                              epsilon: float, num_classes: int,
                              steps: Iterable[int]) -> dict[int, Tensor]:
    """Clipped, renormalised ``P^{-1} lambda_v`` of Algorithm 2, every node, each ``K >= 1``."""
    y = check_label_reports(y_reports, labeled_mask, num_classes)
    onehot = torch.zeros(y.numel(), num_classes)
    onehot[labeled_mask] = torch.nn.functional.one_hot(y[labeled_mask], num_classes).float()
    out = {}
    for k, lam in propagate_snapshots(adj, onehot, steps).items():
        pi = grr_frequencies(lam.clamp_min(0), epsilon=epsilon, num_categories=num_classes,
                             normalize=False)
        zero = pi.sum(dim=1, keepdim=True) <= 0   # no labelled node within K hops: uniform
        est = clip_renormalize(pi, clip_value=CLIP_VALUE)
        out[k] = torch.where(zero, torch.full_like(est, 1.0 / num_classes), est).float()
    return out


def reconstruct_labels_for_steps(adj: Tensor, y_reports: Tensor, labeled_mask: Tensor, *,
                                 epsilon: float, num_classes: int, steps: Iterable[int],
                                 output_mask: Tensor | None = None) -> dict[int, Tensor]:
    """Algorithm 2 (``f_Y``) for several hop counts at once.

    Args:
        adj: ``Â`` from `gnnprivacy.ldp.propagation.mean_adjacency`.
        y_reports: ``(N,)`` GRR label reports; only ``labeled_mask`` rows are read.
        labeled_mask: nodes that reported a label (``V^L`` = train ∪ val).
        epsilon: the label budget ``eps_y`` the users applied.
        num_classes: ``c``.
        steps: hop counts ``K_y``; ``K <= 0`` keeps the reports.
        output_mask: nodes that receive a reconstructed label (default ``labeled_mask``).
            A node outside ``labeled_mask`` gets the estimate from its neighbours' reports
            only (hyperparameter selection uses this to keep validation reports out of
            training); with ``K <= 0`` it gets ``-1``.

    Returns:
        ``{K: labels}``: ``(N,)`` int64, reconstructed on ``output_mask`` and ``-1`` elsewhere.
    """
    y = check_label_reports(y_reports, labeled_mask, num_classes)
    out_mask = labeled_mask if output_mask is None else output_mask
    steps = sorted({check_int("steps", k) for k in steps})
    base = torch.where(labeled_mask & out_mask, y, torch.full_like(y, -1))
    out = {k: base for k in steps if k <= 0}
    positive = [k for k in steps if k > 0]
    for k, pi in label_estimates_for_steps(adj, y, labeled_mask, epsilon=epsilon,
                                           num_classes=num_classes, steps=positive).items():
        out[k] = torch.where(out_mask, pi.argmax(dim=1), torch.full_like(y, -1))
    return out


def reconstruct_labels(adj: Tensor, y_reports: Tensor, labeled_mask: Tensor, *, epsilon: float,
                       num_classes: int, steps: int) -> Tensor:
    """Algorithm 2 (``f_Y``) with ``steps = K_y`` hops; see `reconstruct_labels_for_steps`."""
    return reconstruct_labels_for_steps(adj, y_reports, labeled_mask, epsilon=epsilon,
                                        num_classes=num_classes, steps=[steps])[steps]


__all__ = ["BINARY_OUTPUTS", "CATEGORICAL_OUTPUTS", "check_label_reports",
           "label_estimates_for_steps", "reconstruct_features", "reconstruct_features_for_steps",
           "reconstruct_labels", "reconstruct_labels_for_steps"]
