"""Privacy mechanisms: each a functional core plus a thin class.

Every class is configured with keyword-only privacy parameters (validated at construction)
and called as ``mech(x, *, generator=None)`` on torch tensors. Each states ``.event`` (a
``dp_accounting`` DpEvent), ``.sensitivity``, ``.unit`` and ``.relation``; pure mechanisms also
``.epsilon``. ``secure_mode=True`` draws every random bit from the OS CSPRNG and protects
continuous noise against floating-point attacks (see `gaussian`, `laplace`).

Central: `GaussianMechanism`, `LaplaceMechanism`,
`ExponentialMechanism`. Local: `RandomizedResponse` (binary), `GRR`
(k-ary), `GRRFS` (RGNN's feature sampling), `MultiBit` (LPGNN). Estimators:
`grr_frequencies`, `grr_fs_frequencies`, `GRRFS.estimate_frequencies`,
`MultiBit.rectify`.
"""

from gnnprivacy.mechanisms.base import Mechanism, pure_epsilon_event
from gnnprivacy.mechanisms.exponential import ExponentialMechanism, exponential_probabilities
from gnnprivacy.mechanisms.frequency import grr_frequencies, grr_fs_frequencies
from gnnprivacy.mechanisms.gaussian import GaussianMechanism, gaussian_mechanism
from gnnprivacy.mechanisms.grr_fs import GRRFS
from gnnprivacy.mechanisms.laplace import LaplaceMechanism, laplace_mechanism, snapping_mechanism
from gnnprivacy.mechanisms.multibit import MultiBit, lpgnn_default_m
from gnnprivacy.mechanisms.randomized_response import (GRR, RandomizedResponse,
                                                       generalized_randomized_response,
                                                       grr_probabilities)

__all__ = [
    "GRR", "GRRFS", "ExponentialMechanism", "GaussianMechanism", "LaplaceMechanism", "Mechanism",
    "MultiBit", "RandomizedResponse", "exponential_probabilities", "gaussian_mechanism",
    "generalized_randomized_response", "grr_frequencies", "grr_fs_frequencies", "grr_probabilities",
    "laplace_mechanism", "lpgnn_default_m", "pure_epsilon_event", "snapping_mechanism",
]
