"""Defences that are not differentially private: output perturbation and training regularisers.

* :class:`GRID` (spec 003): disguises links in released posteriors, keeping every prediction.
* :class:`MemGuard` (link-adapted) and :class:`MinMaxTrainer` (adversarial regularisation against
  a link adversary): the counterparts GRID is compared with (spec 003 §5.1).

Privacy: these defences are empirical; none of them claims an epsilon.
"""

import importlib

from gnnprivacy.defenses.grid import GRID, GRIDResult, GridInvariantError

_LAZY = {"MemGuard": "gnnprivacy.defenses.memguard", "MinMaxTrainer": "gnnprivacy.defenses.minmax"}

__all__ = ["GRID", "GRIDResult", "GridInvariantError", "MemGuard", "MinMaxTrainer"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
