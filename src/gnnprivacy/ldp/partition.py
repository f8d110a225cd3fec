"""METIS k-way partitioning of the public graph (RGNN's clustering ``h_E``).

Bhaila et al., SDM 2024, Section IV-C; spec 004 §7.1 and §13.24: the server partitions the
*full* public graph (all nodes, structure only) into ``C`` disjoint parts of about ``N / C``
nodes, minimising the edge cut; the parts become the bags of the label-proportion regulariser.

Partitioner: ``pymetis`` (``METIS_PartGraphKway`` through its ``part_graph(recursive=False)``),
installed from PyPI. PyG's ``ClusterData`` would call the same METIS routine but needs
``torch-sparse``/``pyg-lib`` built with METIS, which are not available for this torch version.
METIS is randomised: the seed is passed through ``pymetis.Options(seed=...)``, so a partition
is reproducible from it. Only public information (the edges) is used, so clustering has no
privacy cost.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError


def _csr(edge_index: Tensor, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    ei = edge_index.detach().cpu().long().numpy()
    ei = ei[:, ei[0] != ei[1]]
    both = np.concatenate([ei, ei[::-1]], axis=1)  # METIS needs both directions
    key = np.unique(both[0] * num_nodes + both[1])
    row, col = key // num_nodes, key % num_nodes
    xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=num_nodes), out=xadj[1:])
    return xadj, col.astype(np.int64)


def metis_partition(edge_index: Tensor, num_nodes: int, num_parts: int, *, seed: int = 0) -> Tensor:
    """Partition the undirected graph into ``num_parts`` disjoint parts with METIS k-way.

    Args:
        edge_index: ``(2, E)`` edges (direction and duplicates are ignored).
        num_nodes: ``N``.
        num_parts: ``C`` with ``1 <= C <= N``; ``C = 1`` puts every node in part 0.
        seed: METIS random seed (non-negative, < 2**31).

    Returns:
        ``(N,)`` int64 tensor of part ids in ``[0, C)``.

    Raises:
        InvalidParameterError: ``num_parts`` outside ``[1, N]`` or a bad ``seed``.
    """
    n = check_int("num_nodes", num_nodes, low=1)
    c = check_int("num_parts", num_parts, low=1, high=n)
    s = check_int("seed", seed, low=0, high=2**31 - 1)
    if c == 1:
        return torch.zeros(n, dtype=torch.long)
    import pymetis

    xadj, adjncy = _csr(edge_index, n)
    if adjncy.size == 0:
        raise InvalidParameterError("edge_index", "a graph with at least one edge for METIS", 0)
    graph = pymetis.CSRAdjacency(adj_starts=xadj, adjacent=adjncy)
    result = pymetis.part_graph(c, graph, recursive=False, options=pymetis.Options(seed=s))
    return torch.as_tensor(np.asarray(result.vertex_part, dtype=np.int64))


__all__ = ["metis_partition"]
