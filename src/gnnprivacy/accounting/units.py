"""Privacy units and neighbouring relations as named types.

A privacy guarantee is always *about* something: one node (its features, label and
edges), one edge, one node's features, or one node's label; and *between* datasets
related by adding/removing or by replacing that unit. Accountants carry both and refuse
to compose events that disagree.
"""

from __future__ import annotations

import enum


class PrivacyUnit(str, enum.Enum):
    """What one individual contributes, whose presence the guarantee hides."""

    NODE = "node"          #: a node with its features, label and all incident edges
    EDGE = "edge"          #: one edge
    FEATURE = "feature"    #: one node's feature vector (local DP on features)
    LABEL = "label"        #: one node's label (local DP on labels)
    GRAPH = "graph"        #: one whole graph (its nodes, edges, features and label)

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


class NeighboringRelation(str, enum.Enum):
    """How neighbouring datasets differ in one unit."""

    ADD_OR_REMOVE = "add_or_remove"   #: unbounded DP: one unit present in one dataset only
    REPLACE = "replace"               #: bounded DP: one unit takes another value

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value
