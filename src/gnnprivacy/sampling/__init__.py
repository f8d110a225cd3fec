"""Samplers for node-level DP training and private inference.

* `HeterPoissonSampler` - HeterPoisson star sub-graphs (spec 000 §3.1-3.2, 3.6);
* `inference_stars` - test-only stars for private inference (spec 000 §3.5);
* `sample_degree_bounded_subgraphs` - DP-GNN's Algorithm 2 (spec 002 §3.2);
* `NodeBatchSampler` - fixed-size / Poisson minibatches (spec 002 §3.6, §4.4);
* `poisson_node_batch` - Poisson node sampling for DP-MLP;
* `CounterRandom` - counter-based randomness for coupling tests (spec 000 §3.2 (h)).

Convention: edge ``j -> i`` (column ``(j, i)`` of ``edge_index``) means ``i`` aggregates
``j``; out-degrees are measured in the whole graph; self-loops are removed.
"""

from gnnprivacy.sampling._bounded_checks import SamplerInvariantError
from gnnprivacy.sampling.counter_rng import CounterRandom, keyed_uniform, splitmix64
from gnnprivacy.sampling.degree_bounded import (
    PRIVACY_SCOPE,
    BoundedSubgraphs,
    sample_degree_bounded_subgraphs,
)
from gnnprivacy.sampling.heter_poisson import HeterPoissonSampler
from gnnprivacy.sampling.inference import inference_stars
from gnnprivacy.sampling.minibatch import NodeBatchSampler, poisson_node_batch
from gnnprivacy.sampling.star_batch import StarBatch, empty_star_batch

__all__ = [
    "BoundedSubgraphs",
    "CounterRandom",
    "HeterPoissonSampler",
    "NodeBatchSampler",
    "PRIVACY_SCOPE",
    "SamplerInvariantError",
    "StarBatch",
    "empty_star_batch",
    "inference_stars",
    "keyed_uniform",
    "poisson_node_batch",
    "sample_degree_bounded_subgraphs",
    "splitmix64",
]
