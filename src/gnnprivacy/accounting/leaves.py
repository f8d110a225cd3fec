"""Flattening composed events into (leaf, count) pairs, and facts about single leaves."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Optional

from dp_accounting import dp_event

from gnnprivacy.accounting.events import (DpGnnDpEvent, EdgeSubgraphDpEvent, EpsilonDeltaDpEvent,
                                          HeterPoissonDpEvent, ScopedDpEvent)


def flatten_event(event: dp_event.DpEvent, count: int) -> Iterator[tuple[dp_event.DpEvent, int]]:
    """Yield ``(leaf, count)`` pairs; composition is commutative, so order is irrelevant.

    ``ComposedDpEvent`` and ``SelfComposedDpEvent`` are expanded, ``ScopedDpEvent`` is
    unwrapped, and events with no privacy cost (``NoOpDpEvent``, zero sampling rate,
    one-bucket randomized response, zero shifts) are dropped.
    """
    if isinstance(event, dp_event.NoOpDpEvent) or is_no_op(event):
        return
    if isinstance(event, ScopedDpEvent):
        yield from flatten_event(event.event, count)
    elif isinstance(event, dp_event.SelfComposedDpEvent):
        yield from flatten_event(event.event, count * event.count)
    elif isinstance(event, dp_event.ComposedDpEvent):
        for sub in event.events:
            yield from flatten_event(sub, count)
    else:
        yield event, count


def is_no_op(event: dp_event.DpEvent) -> bool:
    """Whether ``event`` has no privacy cost at all."""
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return event.sampling_probability == 0
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return event.num_buckets == 1
    if isinstance(event, dp_event.MixtureOfGaussiansDpEvent):
        return all(s == 0 for s, p in zip(event.sensitivities, event.sampling_probs) if p > 0)
    if isinstance(event, dp_event.TruncatedSubsampledGaussianDpEvent):
        return (event.sampling_probability == 0 or event.truncated_batch_size == 0
                or event.dataset_size == 0)
    if isinstance(event, EpsilonDeltaDpEvent):
        return event.epsilon == 0 and event.delta == 0
    if isinstance(event, (HeterPoissonDpEvent, EdgeSubgraphDpEvent)):
        return event.sampling_probability == 0
    return False


def is_non_private(event: dp_event.DpEvent) -> bool:
    """Whether the leaf ``event`` satisfies no finite (epsilon, delta < 1)-DP guarantee."""
    if isinstance(event, dp_event.NonPrivateDpEvent):
        return True
    if isinstance(event, (dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent,
                          dp_event.TruncatedSubsampledGaussianDpEvent,
                          HeterPoissonDpEvent, DpGnnDpEvent, EdgeSubgraphDpEvent)):
        return event.noise_multiplier == 0
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        inner = event.event
        return getattr(inner, "noise_multiplier", None) == 0 or isinstance(
            inner, dp_event.NonPrivateDpEvent)
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return event.noise_parameter == 0
    if isinstance(event, dp_event.MixtureOfGaussiansDpEvent):
        return event.standard_deviation == 0
    if isinstance(event, EpsilonDeltaDpEvent):
        return math.isinf(event.epsilon) or event.delta >= 1
    return False


def pure_epsilon(event: dp_event.DpEvent) -> Optional[float]:
    """The epsilon of a pure-DP leaf (delta = 0), or ``None`` if it is not pure DP."""
    if isinstance(event, EpsilonDeltaDpEvent):
        return float(event.epsilon) if event.delta == 0 else None
    if isinstance(event, dp_event.LaplaceDpEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        p, k = event.noise_parameter, event.num_buckets
        return math.log((1.0 - p + p / k) / (p / k))
    return None
