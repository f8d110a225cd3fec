"""Defences that are not differentially private: output perturbation and training regularisers.

* :class:`GRID` (spec 003): disguises links in released posteriors, keeping every prediction.
* :class:`MemGuard` (link-adapted) and :class:`MinMaxTrainer` (adversarial regularisation against
  a link adversary): the counterparts GRID is compared with (spec 003 §5.1).

Privacy: these defences are empirical; none of them claims an epsilon.
"""

from gnnprivacy._lazy import lazy_getattr
from gnnprivacy.defenses.grid import GRID, GridInvariantError, GRIDResult

_LAZY = {"MemGuard": "gnnprivacy.defenses.memguard", "MinMaxTrainer": "gnnprivacy.defenses.minmax"}

__all__ = ["GRID", "GRIDResult", "GridInvariantError", "MemGuard", "MinMaxTrainer"]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
