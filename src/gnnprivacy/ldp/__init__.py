"""Node-level local differential privacy for GNNs: RGNN (SDM 2024) and the LPGNN baseline.

User side (`reports`, using `gnnprivacy.mechanisms`): GRR-FS / multi-bit feature
reports and GRR label reports, after public preprocessing (`grouping`, `german`).
Server side: sparse K-hop propagation (`propagation`), frequency-estimation based
reconstruction (`reconstruction`, Algorithms 1-2), METIS bags and the label-proportion
regulariser (`partition`, `llp`), RGNN training and selection (`rgnn`,
Algorithm 3), LPGNN (`lpgnn`). Per-user budgets: `budget`.
"""

from gnnprivacy.ldp.budget import budget_summary, feature_budget, ldp_accountant, user_budget
from gnnprivacy.ldp.german import binarize_german
from gnnprivacy.ldp.grouping import group_features, grouped_dim
from gnnprivacy.ldp.lpgnn import LPGNN, LPGNNConfig
from gnnprivacy.ldp.reconstruction import reconstruct_features, reconstruct_labels
from gnnprivacy.ldp.reports import ServerView, collect_reports
from gnnprivacy.ldp.rgnn import RGNN, RGNNConfig

__all__ = ["LPGNN", "LPGNNConfig", "RGNN", "RGNNConfig", "ServerView", "binarize_german",
           "budget_summary", "collect_reports", "feature_budget", "group_features", "grouped_dim",
           "ldp_accountant", "reconstruct_features", "reconstruct_labels", "user_budget"]
