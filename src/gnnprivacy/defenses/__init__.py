"""Defences that are not differentially private: output perturbation and training regularisers.

* `GRID` (spec 003): disguises links in released posteriors, keeping every prediction.
* `MemGuard` (link-adapted) and `MinMaxTrainer` (adversarial regularisation against
  a link adversary): the counterparts GRID is compared with (spec 003 §5.1).

Privacy: these defences are empirical; none of them claims an epsilon.
"""

from typing import TYPE_CHECKING

from gnnprivacy._lazy import lazy_exports
from gnnprivacy.defenses.grid import GRID, GridInvariantError, GRIDResult

if TYPE_CHECKING:
    from gnnprivacy.defenses.memguard import MemGuard
    from gnnprivacy.defenses.minmax import MinMaxTrainer

__all__ = ["GRID", "GRIDResult", "GridInvariantError", "MemGuard", "MinMaxTrainer"]

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
