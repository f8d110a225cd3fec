"""Privacy events beyond dp_accounting's own.

Every event is a frozen ``attrs`` class subclassing `dp_accounting.DpEvent`, so it
can sit inside dp_accounting's ``ComposedDpEvent`` / ``SelfComposedDpEvent`` and be
converted with ``to_named_tuple``. Events only *describe* a mechanism; the accountants in
`gnnprivacy.accounting.accountants` turn them into RDP curves or PLDs.

Events may declare the privacy unit and neighbouring relation their analysis is valid
for (`declared_scope`); dp_accounting's own events declare nothing and are taken
to be about the accountant's unit. `ScopedDpEvent` attaches a scope to any event.

References:
    000: Xiang, Wang, Wang, *Preserving Node-level Privacy in GNNs*, S&P 2024 (Thm 2).
    002: *Node-Level Differentially Private Graph Neural Networks* (DP-GNN, Theorem 1).
"""

from __future__ import annotations

import math
from typing import Optional

import attr
from dp_accounting import dp_event

from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

HETERPOISSON_MODES = ("sound", "paper")
DPGNN_SAMPLINGS = ("fixed", "poisson")


@attr.s(frozen=True, slots=True, auto_attribs=True)
class EpsilonDeltaDpEvent(dp_event.DpEvent):
    """A mechanism known only to be (epsilon, delta)-DP, e.g. a pure-epsilon local mechanism.

    The accountants use the worst case pair of all (epsilon, delta)-DP mechanisms
    (randomized response with an extra delta-mass on an infinite loss; Kairouz et al.
    2015), so composing these events is the *optimal* composition of (epsilon,
    delta)-DP mechanisms under PLD, and exactly the sum of epsilons when ``delta = 0``
    and the target delta is 0. GRR, GRR-FS, multi-bit and the exponential mechanism
    emit ``EpsilonDeltaDpEvent(epsilon, 0.0)``.

    Attributes:
        epsilon: the epsilon of the mechanism (>= 0).
        delta: its delta (0 for pure DP).
    """

    epsilon: float
    delta: float = 0.0


@attr.s(frozen=True, slots=True, auto_attribs=True)
class ScopedDpEvent(dp_event.DpEvent):
    """Declares the privacy unit (and optionally the relation) of a wrapped event.

    An accountant refuses (``PrivacyUnitMismatchError``) a scoped event whose unit or
    relation differs from its own, and otherwise accounts the wrapped ``event``.

    Attributes:
        event: the wrapped event.
        unit: the privacy unit the wrapped mechanism protects.
        relation: the neighbouring relation its analysis assumes (``None``: any).
    """

    event: dp_event.DpEvent
    unit: PrivacyUnit
    relation: Optional[NeighboringRelation] = None


@attr.s(frozen=True, slots=True, auto_attribs=True)
class HeterPoissonDpEvent(dp_event.DpEvent):
    """One noisy step of node-level DP-SGD with HeterPoisson sampling (000, Theorem 2).

    Fix the differing node z with out-degree D. In units of the clip norm R, the step's
    output on G* is N(0, z_n^2) and on G' = G* + z it is the mixture of Gaussians (000 §4.1)

    * shift 1 (one clipped gradient) with probability q_b (z is a central node);
    * shift 2k with probability (1 - q_b) Bin(k; D, p), p = q_b min(1, M/D), k = 0..D
      (k sub-graphs that sampled z as a peripheral, each changed by at most 2R),

    where z_n = ``noise_multiplier`` = sigma / R. Without overlap removal (000 §4.6) the
    central case also carries the peripheral shifts: 2k + 1 w.p. q_b Bin(k) and 2k w.p.
    (1 - q_b) Bin(k). The worst case is taken over every D in ``degrees``.

    Privacy: unit NODE, relation ADD_OR_REMOVE (000 Def. 4, scenario S2; degrees of the
    whole graph G are public).

    Attributes:
        sampling_probability: q_b, the central-node sampling rate.
        neighbor_multiplier: M, the expected peripheral uses per unit central rate.
        degrees: the out-degrees D to maximise over (sorted, distinct).
        noise_multiplier: sigma / R (noise std over the clip norm).
        overlap_removal: whether peripherals that are central nodes are removed (Alg. 2).
        mode: ``"sound"`` (PLD of the mixture, max over D after composition, 000 §4.7) or
            ``"paper"`` (Theorem 2's RDP, accounted by the RDP accountant only).
    """

    sampling_probability: float
    neighbor_multiplier: float
    degrees: tuple
    noise_multiplier: float
    overlap_removal: bool = True
    mode: str = "sound"

    @property
    def max_degree(self) -> int:
        return int(self.degrees[-1])


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DpGnnDpEvent(dp_event.DpEvent):
    """One noisy step of DP-GNN with degree-bounded sub-graphs (002, Theorem 1).

    With occurrence bound K, a node influences at most K + 1 per-node terms; each
    changes the clipped sum by at most 2C and the noise std is sigma = lambda 2(K+1)C.
    Conditioned on the number i of affected terms in the batch the step is a Gaussian
    mechanism with normalised shift i / ((K+1) lambda); i follows Hypergeometric(N, K+1, m)
    for a uniform batch of m out of N (``sampling="fixed"``) or Binomial(K+1, m/N) for
    Poisson sampling with expected batch m (``sampling="poisson"``, 002 §4.4 [EXT]).
    The step is dominated by the mixture over i with i revealed (Lemma 4 / joint
    convexity), which both accountants use.

    Privacy: unit NODE; relation REPLACE for fixed batches (N public, 002 §8 A1); for
    Poisson batches the bound 2(K+1)C also holds under add/remove, so no relation is
    declared.

    Attributes:
        num_train: N, number of training nodes.
        max_degree: K, the degree (occurrence) bound.
        batch_size: m, the batch size (expected batch size for Poisson sampling).
        noise_multiplier: lambda = sigma / (2 (K+1) C).
        sampling: ``"fixed"`` or ``"poisson"``.
    """

    num_train: int
    max_degree: int
    batch_size: int
    noise_multiplier: float
    sampling: str = "fixed"


@attr.s(frozen=True, slots=True, auto_attribs=True)
class EdgeSubgraphDpEvent(dp_event.DpEvent):
    """One noisy step of edge-level DP-SGD over Poisson-sampled subgraphs.

    Every training node is a subgraph centre independently with probability ``q``; each
    sampled subgraph's whole gradient is clipped to ``C`` and one draw ``N(0, (z C)^2 I)``
    is added to the sum. Adding or removing one edge (the unit) changes the content of at
    most ``m = occurrence * bounding_factor`` subgraphs (of distinct centres) and no others;
    each changed subgraph's clipped gradient moves from ``a_w`` to ``b_w``, both of norm
    at most ``C`` (a substitution: the centre is sampled in both graphs or in neither).

    Analysis. Write the noise as a sum of ``m`` independent ``N(0, (z C)^2 I / m)``
    parts, part ``j`` attached to affected centre ``w_j``. The release is a post-processing
    (a sum, plus the unaffected centres' common terms) of the ``m`` independent releases
    ``1[w_j sampled] a_{w_j} + N_j``, each a Poisson-subsampled Gaussian under
    substitution with noise multiplier ``z / sqrt(m)``, whose dominating pair is
    ``(1-q) N(0, s^2) + q N(-1, s^2)`` vs ``(1-q) N(0, s^2) + q N(1, s^2)``, ``s = z /
    sqrt(m)`` (dp_accounting's ``REPLACE_ONE`` pair; Zhu, Dong and Wang, AISTATS 2022). So
    one step is dominated by the ``m``-fold composition of that pair. At ``q = 1`` this is
    the Gaussian mechanism with sensitivity ``2 m C``, i.e. exact.

    Privacy: unit EDGE, relation ADD_OR_REMOVE (one edge added or removed; an undirected
    edge is both of its directed entries, see ``occurrence``); node features, labels and
    the node set are public.

    Attributes:
        sampling_probability: q, the rate of each training node as a centre.
        noise_multiplier: z = sigma / C.
        occurrence: the most subgraphs of one step that contain the unit edge (both
            directions of an undirected edge), as the sampler builds them; the code audit
            checks it on every executed step.
        bounding_factor: how many times ``occurrence`` one raw edge can change through
            the sampler's degree bounding (1: no bounding; 2 or 3: a top-``D`` selection by
            fixed per-edge priorities, where one added edge can displace one kept edge per
            bounded end).
        undirected: the unit is an unordered pair ``{u, v}`` (both entries; the audit
            counts them together) rather than one directed entry.
    """

    sampling_probability: float
    noise_multiplier: float
    occurrence: int
    bounding_factor: int = 1
    undirected: bool = True

    @property
    def group(self) -> int:
        """``m``: the most subgraphs whose content one edge changes."""
        return int(self.occurrence) * int(self.bounding_factor)


def declared_scope(event: dp_event.DpEvent) -> list[tuple[Optional[PrivacyUnit],
                                                          Optional[NeighboringRelation]]]:
    """Every (unit, relation) pair declared anywhere inside ``event``.

    ``None`` means "not declared". dp_accounting's own events declare nothing.
    """
    if isinstance(event, ScopedDpEvent):
        return [(event.unit, event.relation)] + declared_scope(event.event)
    if isinstance(event, HeterPoissonDpEvent):
        return [(PrivacyUnit.NODE, NeighboringRelation.ADD_OR_REMOVE)]
    if isinstance(event, DpGnnDpEvent):
        relation = NeighboringRelation.REPLACE if event.sampling == "fixed" else None
        return [(PrivacyUnit.NODE, relation)]
    if isinstance(event, EdgeSubgraphDpEvent):
        return [(PrivacyUnit.EDGE, NeighboringRelation.ADD_OR_REMOVE)]
    if isinstance(event, dp_event.ComposedDpEvent):
        return [scope for e in event.events for scope in declared_scope(e)]
    inner = getattr(event, "event", None)
    if isinstance(inner, dp_event.DpEvent):
        return declared_scope(inner)
    return []


def resolve_scope(event: dp_event.DpEvent, unit: Optional[PrivacyUnit] = None,
                  relation: Optional[NeighboringRelation] = None
                  ) -> tuple[PrivacyUnit, NeighboringRelation]:
    """The (unit, relation) to account ``event`` under: the given ones, else the first
    declared by the event, else (NODE, ADD_OR_REMOVE)."""
    declared = declared_scope(event)
    if unit is None:
        unit = next((u for u, _ in declared if u is not None), PrivacyUnit.NODE)
    if relation is None:
        relation = next((r for _, r in declared if r is not None),
                        NeighboringRelation.ADD_OR_REMOVE)
    return unit, relation


def event_to_dict(event: dp_event.DpEvent) -> dict:
    """A JSON-able description of an event: its class name and fields, recursively.

    The class name is under ``"type"`` (and under ``"event"`` unless the event has a field
    of that name, e.g. ``PoissonSampledDpEvent.event``), so
    `gnnprivacy.accounting.verify.event_from_dict` can rebuild the event."""
    out: dict = {"event": type(event).__name__, "type": type(event).__name__}
    for field in attr.fields(type(event)):
        out[field.name] = _jsonable(getattr(event, field.name))
    return out


def _jsonable(value):
    if isinstance(value, dp_event.DpEvent):
        return event_to_dict(value)
    if isinstance(value, (PrivacyUnit, NeighboringRelation)):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def describe_event(event: dp_event.DpEvent) -> str:
    """A one-line human description of an event (used by the ledger)."""
    if isinstance(event, HeterPoissonDpEvent):
        return (f"HeterPoisson(q_b={event.sampling_probability:g}, "
                f"M={event.neighbor_multiplier:g}, "
                f"D_max={event.max_degree}, |D|={len(event.degrees)}, "
                f"noise_multiplier={event.noise_multiplier:g}, "
                f"overlap_removal={event.overlap_removal}, mode={event.mode})")
    if isinstance(event, DpGnnDpEvent):
        return (f"DpGnn(N={event.num_train}, K={event.max_degree}, m={event.batch_size}, "
                f"noise_multiplier={event.noise_multiplier:g}, sampling={event.sampling})")
    if isinstance(event, ScopedDpEvent):
        rel = f", {event.relation.value}" if event.relation is not None else ""
        return f"[{event.unit.value}{rel}] {describe_event(event.event)}"
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return f"PoissonSampled(q={event.sampling_probability:g}, {describe_event(event.event)})"
    fields = ", ".join(f"{f.name}={getattr(event, f.name)!r}" for f in attr.fields(type(event))
                       if not isinstance(getattr(event, f.name), dp_event.DpEvent))
    name = type(event).__name__.removesuffix("DpEvent")
    return f"{name}({fields})"
