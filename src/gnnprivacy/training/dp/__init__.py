"""DP-SGD engine: batched per-subgraph gradient norms, clipping, Gaussian noise, DP-Adam.

One engine serves the node-level DP trainers (HeterPoisson, DP-GNN, DP-MLP, GAP) and
`gnnprivacy.make_private`: one capture (`flat_capture`), one rule per module
(`flat_rules`, the segment algebra in `segments`), one clipping path (`clipping`). See
`engine` for the step and its *Privacy* paragraph.
"""

from gnnprivacy.training.dp.clipping import (ClipGroup, ClippedGradients, clip_factors,
                                             clipped_gradient_sum, effective_clip_norm)
from gnnprivacy.training.dp.engine import DPEngine, StepInfo, make_optimizer
from gnnprivacy.training.dp.flat_capture import FallbackWarning, FlatCapture, check_model
from gnnprivacy.training.dp.flat_rules import (UnsupportedModuleError, register_rule,
                                               supported_module_types)
from gnnprivacy.training.dp.noise import gaussian_noise

__all__ = [
    "ClipGroup",
    "ClippedGradients",
    "DPEngine",
    "FallbackWarning",
    "FlatCapture",
    "StepInfo",
    "UnsupportedModuleError",
    "check_model",
    "clip_factors",
    "clipped_gradient_sum",
    "effective_clip_norm",
    "gaussian_noise",
    "make_optimizer",
    "register_rule",
    "supported_module_types",
]
