"""GRID, the link-disguise output defence of spec 003 (see `grid`)."""

from gnnprivacy.defenses.grid.grid import (GRID, GRIDResult, GridInvariantError, check_posteriors,
                                           check_release)
from gnnprivacy.defenses.grid.projection import constraint_check, project_simplex, valid_rows
from gnnprivacy.defenses.grid.similarity import similarity, similarity_grad

__all__ = ["GRID", "GRIDResult", "GridInvariantError", "check_posteriors", "check_release",
           "constraint_check", "project_simplex", "similarity", "similarity_grad", "valid_rows"]
