"""GNN backbones of the LDP methods and seeded full-batch training around them.

Spec 004 §8 / §10.2: two layers, hidden width 16, ReLU then dropout after the first layer, no
activation on the logits. GraphSAGE (mean aggregation with root weight) is the default; GCN
and GAT (4 heads of 16, concatenated) are also supported. Built with
`gnnprivacy.nn.build_encoder` (PyG's ``GraphSAGE`` / ``GCN`` / ``GAT`` models). One
difference from the authors' GAT: PyG's model averages ``heads`` heads in the output layer
where the authors use a single head.

Dropout draws from torch's global generator; `seeded` forks it and seeds it from the
caller's ``torch.Generator``, so training is reproducible and the caller's global state is
left untouched.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from gnnprivacy._validation import check_choice, check_int, check_probability, check_real
from gnnprivacy.nn.encoders import Encoder, build_encoder

BACKBONES = ("sage", "gcn", "gat")


def build_backbone(name: str, in_channels: int, num_classes: int, *, hidden: int = 16,
                   dropout: float = 0.0, heads: int = 4, activation: str = "relu",
                   generator: torch.Generator | None = None) -> Encoder:
    """A 2-layer ``sage`` / ``gcn`` / ``gat`` encoder (GAT: ``heads`` heads of ``hidden``).

    Input dropout is off (the authors apply dropout after the hidden layer only).
    """
    check_choice("backbone", name, BACKBONES)
    hidden = check_int("hidden", hidden, low=1)
    width = hidden * check_int("heads", heads, low=1) if name == "gat" else hidden
    return build_encoder(name, in_channels, num_classes, hidden_channels=width, num_layers=2,
                         activation=activation, dropout=dropout, heads=heads,
                         input_dropout=0.0, generator=generator)


@contextlib.contextmanager
def seeded(generator: torch.Generator | None, device: torch.device | str = "cpu"):
    """Run the block with torch's global RNG forked and seeded from ``generator`` (the CUDA
    RNG of ``device`` too, when it is a CUDA device: dropout there draws from it)."""
    if generator is None:
        yield
        return
    seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev.index or 0] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


__all__ = ["BACKBONES", "build_backbone", "seeded"]


@dataclass(frozen=True)
class ServerModelConfig:
    """Backbone, propagation depths and training settings shared by RGNN and LPGNN.

    Every field has a default (the authors' code, spec 004 §10.2); the subclasses add their
    own fields after these, so construct them with keywords.
    """

    backbone: str = "sage"
    kx: int = 16
    ky: int = 16
    epochs: int = 100
    lr: float = 0.01
    weight_decay: float = 0.0
    hidden: int = 16
    dropout: float = 0.0
    heads: int = 4
    grad_clip: float | None = 5.0

    def __post_init__(self):
        check_choice("backbone", self.backbone, BACKBONES)
        check_int("kx", self.kx, low=0)
        check_int("ky", self.ky, low=0)
        check_int("epochs", self.epochs, low=1)
        check_real("lr", self.lr, low=0.0, low_open=True)
        check_real("weight_decay", self.weight_decay, low=0.0)
        check_int("hidden", self.hidden, low=1)
        check_probability("dropout", self.dropout, allow_one=False)
        check_int("heads", self.heads, low=1)
        if self.grad_clip is not None:
            check_real("grad_clip", self.grad_clip, low=0.0, low_open=True)
