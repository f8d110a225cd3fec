r"""DP-GNN's greedy degree bounding computed in rounds over the parts of a partitioned graph,
with the sequential pass's result.

`sample_degree_bounded_subgraphs` with a `CounterRandom` scans the nodes in the order of keys
keyed by node (training nodes first; the others after them when ``bound_all_nodes``) and each
node's neighbours in the order of keys keyed by ``(node, neighbour)``, keeping an edge when
both ends hold fewer than ``K`` kept edges. Each undirected edge ``{a, b}`` is decided when its
first-scanned end scans it, so the pass is the greedy ``K``-matching in the fixed edge order

    priority({a, b}) = (class(s), key(s), key(s, t)),  s = the end scanned first, t the other

(class 0: training node; 1: other node when ``bound_all_nodes``; an edge none of whose ends is
scanned is never kept). A greedy matching in a fixed order is decided in parallel rounds with
the same result (Blelloch, Fineman and Shun, SPAA 2012, for maximal matching): in a round every
node that is not full proposes its smallest undecided edge; an edge proposed by both ends is
kept (each end's smaller edges are all decided, so its count is the sequential count at that
edge: fewer than ``K``); a node that reaches ``K`` rejects its undecided edges and tells the
owners of their other ends. The globally smallest undecided edge is always decided within two
rounds, so the rounds end.

`PartRounds` holds one part's side of this (its own nodes' edges); the messages between parts
are ``(target node, source node, kind)`` triples for the target's owner. `bounded_edges`
runs parts in one process (tests, and one part for one process); the sharded sampler runs one
part per rank with ``torch.distributed`` all-to-all (`gnnprivacy.training.sharded_bounded`).

Privacy: as `sample_degree_bounded_subgraphs` (the bounding reads the raw graph; its result is
the same bounded graph, so the same occurrence bound and the same unaccounted note).
"""

from __future__ import annotations

import numpy as np
import torch

from gnnprivacy.sampling.counter_rng import CounterRandom
from gnnprivacy.sampling.degree_bounded import STREAM_ORDER, STREAM_SHUFFLE

__all__ = ["FULL", "PROPOSE", "PartRounds", "bounded_edges"]

PROPOSE, FULL = 0, 1
_UNDECIDED, _KEPT, _REJECTED = 0, 1, 2
_NEVER = 2          # the class of a node that is never scanned


def _keys(rng: CounterRandom, stream: int, *ids: np.ndarray) -> np.ndarray:
    return rng.uniform(stream, *(torch.from_numpy(np.array(i, dtype=np.int64)) for i in ids)).numpy()


class PartRounds:
    """One part's side of the bounding rounds (module docstring).

    Args:
        nodes: the part's node ids (ascending, int64).
        indptr, nbrs: CSR over ``nodes``: the neighbours (global ids) of row ``r`` in the
            symmetric simple graph (no self-loop, no duplicate) are
            ``nbrs[indptr[r]:indptr[r+1]]``.
        is_train: ``ids -> bool array``, the training bit of any node (a global map).
        owner: ``ids -> int array``, the part that owns any node.
        part: this part's index.
        rng: the keyed stream of the pass (`CounterRandom`).
        max_degree: ``K``.
        bound_all_nodes: scan the non-training nodes too (after the training nodes).
        num_nodes: the node count of the whole graph.
    """

    def __init__(self, nodes, indptr, nbrs, *, is_train, owner, part: int, rng: CounterRandom,
                 max_degree: int, bound_all_nodes: bool, num_nodes: int):
        self.nodes = np.asarray(nodes, dtype=np.int64)
        self.k = int(max_degree)
        self.part = int(part)
        self._owner = owner
        indptr = np.asarray(indptr, dtype=np.int64)
        nbrs = np.asarray(nbrs, dtype=np.int64)
        row = np.repeat(np.arange(self.nodes.size, dtype=np.int64), np.diff(indptr))
        me = self.nodes[row]
        cls_me, cls_nb = (np.where(is_train(ids), 0, 1 if bound_all_nodes else _NEVER)
                          for ids in (me, nbrs))
        key_me, key_nb = _keys(rng, STREAM_ORDER, me), _keys(rng, STREAM_ORDER, nbrs)
        mine_first = (cls_me < cls_nb) | ((cls_me == cls_nb) & (key_me <= key_nb))
        scanner = np.where(mine_first, me, nbrs)
        other = np.where(mine_first, nbrs, me)
        p_cls = np.where(mine_first, cls_me, cls_nb)
        p_key = np.where(mine_first, key_me, key_nb)
        p_shuf = _keys(rng, STREAM_SHUFFLE, scanner, other)
        order = np.lexsort((other, p_shuf, p_key, p_cls, row))   # rows, then priority
        self.row, self.nbr = row[order], nbrs[order]
        self.status = np.where(p_cls[order] == _NEVER, _REJECTED, _UNDECIDED).astype(np.int8)
        if self.k == 0:
            self.status[:] = _REJECTED
        self.count = np.zeros(self.nodes.size, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(np.bincount(self.row,
                                                                 minlength=self.nodes.size))])
        self.local_nbr = self._local_index(self.nbr)          # -1 when another part owns it
        self._n = int(num_nodes)
        key = self.row * self._n + self.nbr                     # (row, neighbour) lookup
        self._key_order = np.argsort(key, kind="stable")
        self._keys = key[self._key_order]
        self._notices: list[tuple[np.ndarray, np.ndarray]] = []
        self.prop = np.full(self.nodes.size, -1, dtype=np.int64)
        self.rounds = 0

    # ------------------------------------------------------------------ lookups
    def _local_index(self, ids: np.ndarray) -> np.ndarray:
        """Row of each of ``ids`` in this part, -1 for another part's node."""
        pos = np.searchsorted(self.nodes, ids)
        pos = np.minimum(pos, max(self.nodes.size - 1, 0))
        hit = (self.nodes[pos] == ids) if self.nodes.size else np.zeros(ids.shape, bool)
        return np.where(hit, pos, -1)

    def _entry(self, rows: np.ndarray, nbrs: np.ndarray) -> np.ndarray:
        """The entry index of each edge ``(nodes[rows], nbrs)`` (all must exist)."""
        pos = np.searchsorted(self._keys, np.asarray(rows, np.int64) * self._n + nbrs)
        return self._key_order[pos]

    # ------------------------------------------------------------------ one round
    def outgoing(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This round's proposals (of every node that is not full, its smallest undecided
        edge) and the full notices of last round; returns the messages to other parts as
        ``(target, source, kind)``."""
        self.prop[:] = -1
        und = np.flatnonzero(self.status == _UNDECIDED)
        if und.size:
            rows, first = np.unique(self.row[und], return_index=True)
            open_rows = self.count[rows] < self.k
            self.prop[rows[open_rows]] = self.nbr[und[first[open_rows]]]
        mine = np.flatnonzero(self.prop >= 0)
        remote = mine[self._local_index(self.prop[mine]) < 0]
        targets = [self.prop[remote]]
        sources = [self.nodes[remote]]
        kinds = [np.full(remote.size, PROPOSE, dtype=np.int64)]
        for tgt, src in self._notices:
            targets.append(tgt)
            sources.append(src)
            kinds.append(np.full(tgt.size, FULL, dtype=np.int64))
        self._notices = []
        return tuple(np.concatenate(a) if a else np.zeros(0, np.int64)
                     for a in (targets, sources, kinds))

    def incoming(self, targets: np.ndarray, sources: np.ndarray, kinds: np.ndarray) -> None:
        """Apply the messages of other parts (targets are this part's nodes): full notices
        reject edges; an edge proposed by both ends (one end here, one there, or both here)
        is kept; a node that reaches ``K`` rejects its other edges."""
        self.rounds += 1
        rows = self._local_index(targets)
        full = kinds == FULL
        if full.any():
            entries = self._entry(rows[full], sources[full])
            undecided = self.status[entries] == _UNDECIDED
            self.status[entries[undecided]] = _REJECTED
        prop_rows = rows[~full]
        agreed = self.prop[prop_rows] == sources[~full]
        keep_rows = [prop_rows[agreed]]
        keep_nbrs = [sources[~full][agreed]]
        mine = np.flatnonzero(self.prop >= 0)                 # both ends in this part
        local = self._local_index(self.prop[mine])
        both = local >= 0
        a, b = mine[both], local[both]
        mutual = self.prop[b] == self.nodes[a]
        keep_rows.append(a[mutual])
        keep_nbrs.append(self.prop[a[mutual]])
        rows_k = np.concatenate(keep_rows)
        nbrs_k = np.concatenate(keep_nbrs)
        if rows_k.size:
            self.status[self._entry(rows_k, nbrs_k)] = _KEPT
            np.add.at(self.count, rows_k, 1)
        filled = np.unique(rows_k[self.count[rows_k] >= self.k]) if rows_k.size else rows_k
        if filled.size:
            self._fill(filled)

    def _fill(self, rows: np.ndarray) -> None:
        """Reject every undecided edge of the full nodes ``rows``: here at once, there by a
        notice in the next round."""
        in_rows = np.isin(self.row, rows) & (self.status == _UNDECIDED)
        entries = np.flatnonzero(in_rows)
        self.status[entries] = _REJECTED
        nb = self.nbr[entries]
        local = self.local_nbr[entries]
        here = local >= 0
        if here.any():
            back = self._entry(local[here], self.nodes[self.row[entries[here]]])
            und = self.status[back] == _UNDECIDED
            self.status[back[und]] = _REJECTED
        if (~here).any():
            self._notices.append((nb[~here], self.nodes[self.row[entries[~here]]]))

    def active(self) -> int:
        """Undecided edges and notices still to send (the rounds stop when no part has any)."""
        return int((self.status == _UNDECIDED).sum()) + sum(t.size for t, _ in self._notices)

    def kept(self) -> tuple[np.ndarray, np.ndarray]:
        """The kept edges of this part's nodes: ``(node, neighbour)`` pairs, global ids."""
        k = np.flatnonzero(self.status == _KEPT)
        return self.nodes[self.row[k]], self.nbr[k]

    def table(self) -> np.ndarray:
        """``(n_k, K)`` int64: each node's bounded-graph neighbours (ascending), ``-1`` padding."""
        src, nbr = self.kept()
        out = np.full((self.nodes.size, max(self.k, 1)), -1, dtype=np.int64)
        rows = self._local_index(src)
        order = np.lexsort((nbr, rows))
        rows, nbr = rows[order], nbr[order]
        slot = np.arange(rows.size) - np.searchsorted(rows, rows)
        out[rows, slot] = nbr
        return out[:, :self.k] if self.k else out[:, :0]


def bounded_edges(parts: list[PartRounds], *, max_rounds: int = 1_000_000) -> np.ndarray:
    """Run the rounds of ``parts`` in one process (messages passed in memory) to the end;
    returns the kept edges as a ``(2, E)`` array of both directions, sorted by (target,
    source), and sets each part's ``rounds``.

    Raises:
        RuntimeError: the rounds did not end within ``max_rounds`` (each round decides the
            globally smallest undecided edge within two, so ``2 E + 2`` always suffice).
    """
    owner = parts[0]._owner
    for done in range(max_rounds + 1):
        if not sum(p.active() for p in parts):
            break
        if done == max_rounds:
            raise RuntimeError(f"the bounding rounds did not end in {max_rounds} rounds")
        out = [p.outgoing() for p in parts]
        tgt = np.concatenate([o[0] for o in out])
        src = np.concatenate([o[1] for o in out])
        kind = np.concatenate([o[2] for o in out])
        dest = owner(tgt) if tgt.size else tgt
        for k, p in enumerate(parts):
            sel = dest == k
            p.incoming(tgt[sel], src[sel], kind[sel])
    pairs = [p.kept() for p in parts]
    a = np.concatenate([x for x, _ in pairs])
    b = np.concatenate([y for _, y in pairs])
    order = np.lexsort((b, a))
    return np.stack([b[order], a[order]])
