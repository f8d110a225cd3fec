"""Empirical privacy audits: canary experiments and exact enumeration (spec 000 §3.7).

``audit(method, dataset, epsilon=..., mode="mechanism")`` returns an
`AuditResult` with the claimed epsilon, a Clopper-Pearson lower bound at 95%
confidence and a GDP-based figure (Nasr et al. 2023) beside it. Building blocks:

* `bounds`: Clopper-Pearson, threshold search, GDP conversion;
* `laws`: per-step shift laws of the methods' mechanisms;
* `mechanism`: vectorised mechanism-only and paper-literal audits;
* `local`: exact audits of GRR, GRR-FS and multi-bit;
* `training`: the real trainer with an inserted canary node.
"""

from gnnprivacy.auditing.api import MODES, AuditResult, audit, audit_plan
from gnnprivacy.auditing.bounds import (clopper_pearson_upper, empirical_epsilon,
                                        epsilon_from_rates, gdp_epsilon, gdp_mu_from_rates)
from gnnprivacy.auditing.laws import (Phase, ShiftLaw, dpgnn_law, dpsgd_law, gaussian_law,
                                      heterpoisson_law)
from gnnprivacy.auditing.local import (exact_epsilon, exact_epsilon_pair, grr_audit, grr_fs_audit,
                                       multibit_audit)
from gnnprivacy.auditing.mechanism import audit_phases, paper_literal_audit, simulate_statistics
from gnnprivacy.auditing.plans import GraphFacts, MechanismPlan, plan_for

__all__ = ["AuditResult", "MODES", "audit", "audit_plan", "clopper_pearson_upper",
           "empirical_epsilon", "epsilon_from_rates", "gdp_epsilon", "gdp_mu_from_rates",
           "Phase", "ShiftLaw", "dpgnn_law", "dpsgd_law", "gaussian_law", "heterpoisson_law",
           "exact_epsilon", "exact_epsilon_pair", "grr_audit", "grr_fs_audit", "multibit_audit",
           "audit_phases", "paper_literal_audit", "simulate_statistics", "GraphFacts",
           "MechanismPlan", "plan_for"]
