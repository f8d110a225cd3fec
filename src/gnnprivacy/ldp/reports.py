"""User side of node-level local DP and the server's view of what the users sent.

Bhaila et al., SDM 2024, Section III and Algorithm 3 lines 2-3; spec 004 §3, §8. Every user
(node) holds a binary feature vector (after the public preprocessing: OR-grouping or fixed
bins) and, if labelled (train ∪ val), a class label. Once, locally and independently:

* features: GRR-FS (`gnnprivacy.mechanisms.GRRFS`): ``m`` of ``d`` features through
  GRR with ``eps_x`` each, the others uniform; or, for the LPGNN baseline, the multi-bit
  encoder (`gnnprivacy.mechanisms.MultiBit`) with total budget ``m * eps_x`` on public
  bounds ``[0, 1]``;
* labels: GRR over the ``c`` classes (`gnnprivacy.mechanisms.GRR`) with ``eps_y``; test
  users report no label.

The server then sees a `ServerView` only: the public graph and split, the reports and
the public parameters. Test labels never enter it.

Privacy: per user, a feature report (``m eps_x``-LDP, tight) plus, for labelled users, a label
report (``eps_y``-LDP); see `gnnprivacy.ldp.budget` for the composition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from gnnprivacy._validation import check_int, check_positive
from gnnprivacy.accounting.units import PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import GRR, GRRFS, MultiBit

FEATURE_MECHANISMS = ("grr-fs", "multibit")


@dataclass(frozen=True)
class ServerView:
    """Everything the untrusted server receives (and nothing else).

    Attributes:
        edge_index: public graph, ``(2, E)``.
        num_nodes: ``N``.
        x_reports: ``(N, d)`` feature reports (GRR-FS: int64 categories; multi-bit: floats
            in ``{-1, 0, 1}``).
        y_reports: ``(N,)`` int64 label reports, ``-1`` for users that reported none.
        train_mask, val_mask, test_mask: the public split.
        num_classes: ``c``.
        feature_mechanism: ``"grr-fs"`` or ``"multibit"``.
        feature_epsilon: ``eps_x``, the budget of each sampled feature.
        m: features sampled per user.
        label_epsilon: ``eps_y``.
        domain_sizes: per-feature domain sizes (public; GRR-FS only).
    """

    edge_index: Tensor
    num_nodes: int
    x_reports: Tensor
    y_reports: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor
    num_classes: int
    feature_mechanism: str
    feature_epsilon: float
    m: int
    label_epsilon: float
    domain_sizes: Tensor | None = None
    mechanisms: dict = field(default_factory=dict, compare=False)

    @property
    def labeled_mask(self) -> Tensor:
        """Users that reported a label (train ∪ val)."""
        return self.train_mask | self.val_mask

    @property
    def num_features(self) -> int:
        return int(self.x_reports.size(1))


def _check_inputs(x: Tensor, y: Tensor, masks: tuple[Tensor, ...], num_classes: int) -> None:
    n = x.size(0) if isinstance(x, Tensor) and x.dim() == 2 else None
    if n is None:
        raise InvalidParameterError("x", "a 2-D (N, d) feature tensor",
                                    tuple(x.shape) if isinstance(x, Tensor) else type(x))
    for name, t in zip(("y", "train_mask", "val_mask", "test_mask"), (y, *masks)):
        if not isinstance(t, Tensor) or t.shape != (n,):
            raise InvalidParameterError(name, f"a tensor of shape ({n},)",
                                        tuple(t.shape) if isinstance(t, Tensor) else type(t))
    labeled = masks[0] | masks[1]
    lab = y[labeled]
    if lab.numel() and (torch.is_floating_point(lab) or int(lab.min()) < 0
                        or int(lab.max()) >= num_classes):
        raise InvalidParameterError("y", f"integer labels in [0, {num_classes}) on labelled nodes",
                                    f"values in [{lab.min().item()}, {lab.max().item()}]")


def collect_reports(x: Tensor, y: Tensor, *, edge_index: Tensor, train_mask: Tensor,
                    val_mask: Tensor, test_mask: Tensor, num_classes: int, eps_x: float,
                    eps_y: float, m: int | None, feature_mechanism: str = "grr-fs",
                    generator: torch.Generator | None = None,
                    secure_mode: bool = False) -> ServerView:
    """Run the users' randomizers and return what the server receives.

    Args:
        x: ``(N, d)`` binary features (already grouped / binarised by the public rules).
        y: ``(N,)`` true labels (only train ∪ val rows are read: test users report nothing).
        edge_index: the public graph.
        train_mask: public training nodes.
        val_mask: public validation nodes.
        test_mask: public test nodes.
        num_classes: ``c >= 2``.
        eps_x: budget of each sampled feature (``> 0``); the user's feature budget is
            ``m * eps_x``.
        eps_y: label budget (``> 0``).
        m: features sampled per user (``1 <= m <= d``; ``None`` = ``d``).
        feature_mechanism: ``"grr-fs"`` (RGNN) or ``"multibit"`` (LPGNN; bounds ``[0, 1]``).
        generator: randomness of the users' coins.
        secure_mode: draw the coins from the OS CSPRNG instead.

    Raises:
        InvalidParameterError: non-binary features (GRR-FS without grouping), ``m > d``,
            ``eps <= 0``, labels outside ``[0, c)``, shape mismatches.
    """
    c = check_int("num_classes", num_classes, low=2)
    _check_inputs(x, y, (train_mask, val_mask, test_mask), c)
    check_positive("eps_x", eps_x)
    check_positive("eps_y", eps_y)
    d = x.size(1)
    m = d if m is None else check_int("m", m, low=1, high=d)
    if feature_mechanism == "grr-fs":
        feat = GRRFS.from_feature_epsilon(eps_x, num_features=d, m=m, secure_mode=secure_mode)
        x_rep = feat(x, generator=generator)
    elif feature_mechanism == "multibit":
        feat = MultiBit(epsilon=m * eps_x, num_features=d, lower=0.0, upper=1.0, m=m,
                        secure_mode=secure_mode)
        x_rep = feat(x.to(torch.float32), generator=generator)
    else:
        raise InvalidParameterError("feature_mechanism", f"one of {list(FEATURE_MECHANISMS)}",
                                    feature_mechanism)
    label = GRR(epsilon=eps_y, num_categories=c, unit=PrivacyUnit.LABEL, secure_mode=secure_mode)
    labeled = train_mask | val_mask
    y_rep = torch.full((x.size(0),), -1, dtype=torch.long)
    y_rep[labeled] = label(y[labeled].long(), generator=generator)
    return ServerView(edge_index=edge_index, num_nodes=x.size(0), x_reports=x_rep, y_reports=y_rep,
                      train_mask=train_mask, val_mask=val_mask, test_mask=test_mask,
                      num_classes=c, feature_mechanism=feature_mechanism,
                      feature_epsilon=float(eps_x), m=m, label_epsilon=float(eps_y),
                      domain_sizes=getattr(feat, "domain_sizes", None),
                      mechanisms={"features": feat, "labels": label})


__all__ = ["FEATURE_MECHANISMS", "ServerView", "collect_reports"]
