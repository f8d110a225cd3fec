"""Node-level DP for the user's own PyG model and loop: `make_private`.

See `make_private` for the loop and its privacy contract, `samplers` for the
subgraph samplers (``"heterpoisson"``, ``"degree_bounded"``, ``"nodes"``), `graph_sampler`
for graph-level DP (``"graphs"``: unit graph), `edge_sampler` for edge-level DP
(``"edges"``: unit edge, with `edge_inference`'s edge-private predictions), `private_predict`
for predictions that read no training node.
"""

from gnnprivacy.training.private.edge_inference import EdgePrivatePredictor
from gnnprivacy.training.private.edge_sampler import EdgeSubgraphs
from gnnprivacy.training.private.graph_sampler import GraphSampler
from gnnprivacy.training.private.inference import private_predict
from gnnprivacy.training.private.make_private import PrivateLoader, PrivateTraining, make_private
from gnnprivacy.training.private.samplers import (SAMPLERS, DegreeBoundedSubgraphs,
                                                  HeterPoissonSubgraphs, NodeSubgraphs,
                                                  SamplerPlan, SubgraphSampler, make_sampler)

__all__ = [
    "DegreeBoundedSubgraphs",
    "EdgePrivatePredictor",
    "EdgeSubgraphs",
    "GraphSampler",
    "HeterPoissonSubgraphs",
    "NodeSubgraphs",
    "PrivateLoader",
    "PrivateTraining",
    "SAMPLERS",
    "SamplerPlan",
    "SubgraphSampler",
    "make_private",
    "make_sampler",
    "private_predict",
]
