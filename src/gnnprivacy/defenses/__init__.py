"""Defences that are not differentially private: output perturbation and training regularisers.

* :class:`GRID` (spec 003): disguises links in released posteriors, keeping every prediction.

Privacy: these defences are empirical; none of them claims an epsilon.
"""

from gnnprivacy.defenses.grid import GRID, GRIDResult, GridInvariantError

__all__ = ["GRID", "GRIDResult", "GridInvariantError"]
