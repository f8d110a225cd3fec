"""DP-SGD engine: batched per-subgraph gradient norms, clipping, Gaussian noise, DP-Adam.

The engine is shared by the node-level DP trainers (HeterPoisson, DP-GNN, DP-MLP). See
`engine` for the step and its *Privacy* paragraph, `rules` for the ghost-norm
math, `clipping` for clip groups.
"""

from gnnprivacy.training.dp.capture import ActivationCapture, check_model
from gnnprivacy.training.dp.clipping import (ClipGroup, ClippedGradients, clip_factors,
                                             clipped_gradient_sum, effective_clip_norm)
from gnnprivacy.training.dp.engine import DPEngine, StepInfo, make_optimizer
from gnnprivacy.training.dp.flat_capture import FallbackWarning
from gnnprivacy.training.dp.noise import gaussian_noise
from gnnprivacy.training.dp.rules import GhostRule, UnsupportedModuleError, register_rule

__all__ = [
    "ActivationCapture",
    "ClipGroup",
    "ClippedGradients",
    "DPEngine",
    "FallbackWarning",
    "GhostRule",
    "StepInfo",
    "UnsupportedModuleError",
    "check_model",
    "clip_factors",
    "clipped_gradient_sum",
    "effective_clip_norm",
    "gaussian_noise",
    "make_optimizer",
    "register_rule",
]
