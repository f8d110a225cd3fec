"""``account(...)``: the epsilon of a mechanism after some steps, or the noise it needs.

One code path for ``gnnprivacy account`` and the Python API ``gnnprivacy.account``. Pure
numpy/scipy over dp_accounting (no torch).

Example:
    >>> from gnnprivacy.accounting.query import account
    >>> r = account("dpsgd", sample_rate=0.01, noise_multiplier=1.1, steps=1000, delta=1e-5)
    >>> round(r["epsilon"], 3)
    1.516
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dp_accounting import dp_event

from gnnprivacy._validation import (check_choice, check_delta_range, check_int,
                                    check_probability, check_real)
from gnnprivacy.accounting.accountants import make_accountant
from gnnprivacy.accounting.builders import (dpgnn_event, dpsgd_event, gaussian_event,
                                            heterpoisson_event, laplace_event,
                                            randomized_response_event)
from gnnprivacy.accounting.calibration import calibrate_noise_multiplier
from gnnprivacy.accounting.events import resolve_scope
from gnnprivacy.accounting.units import NeighboringRelation
from gnnprivacy.errors import InvalidParameterError

__all__ = ["MECHANISMS", "account"]

#: mechanisms ``account`` knows, with the parameters each needs
MECHANISMS: dict[str, tuple[str, ...]] = {
    "dpsgd": ("sample_rate",),
    "heterpoisson": ("q_b", "multiplier", "max_out_degree or num_nodes"),
    "dpgnn": ("num_nodes", "batch_size", "degree_bound"),
    "gaussian": (),
    "laplace": (),
    "rr": ("epsilon",),
}


#: the optional parameters each mechanism reads; any other one given is an error
_READS: dict[str, frozenset] = {
    "dpsgd": frozenset({"sample_rate"}),
    "heterpoisson": frozenset({"q_b", "multiplier", "max_out_degree", "num_nodes",
                               "overlap_removal", "mode"}),
    "dpgnn": frozenset({"num_nodes", "batch_size", "degree_bound", "sampling"}),
    "gaussian": frozenset(),
    "laplace": frozenset({"epsilon"}),
    "rr": frozenset({"epsilon", "num_buckets"}),
}
#: defaults of the options that have one (given = differs from it)
_DEFAULTS = {"sampling": "fixed", "overlap_removal": True, "mode": "sound", "num_buckets": 2}


def _check_combination(mechanism: str, p: dict, noise_multiplier, target_epsilon) -> None:
    """Refuse options the mechanism would ignore and contradictory ones (issue 24)."""
    for name, value in p.items():
        given = value != _DEFAULTS[name] if name in _DEFAULTS else value is not None
        if given and name not in _READS[mechanism]:
            raise InvalidParameterError(name, f"unset: mechanism {mechanism!r} does not use it",
                                        value)
    if noise_multiplier is not None and target_epsilon is not None:
        raise InvalidParameterError("noise_multiplier", "unset when target_epsilon is given "
                                    "(take the noise, or calibrate it: not both)",
                                    noise_multiplier)
    if mechanism == "rr" and noise_multiplier is not None:
        raise InvalidParameterError("noise_multiplier", "unset: rr is set by its epsilon",
                                    noise_multiplier)
    if mechanism == "laplace" and p["epsilon"] is not None and (
            noise_multiplier is not None or target_epsilon is not None):
        raise InvalidParameterError("epsilon", "unset when noise_multiplier or target_epsilon "
                                    "is given (laplace's scale comes from one of them)",
                                    p["epsilon"])


def _require(p: dict, name: str, mechanism: str):
    if p.get(name) is None:
        raise InvalidParameterError(name, f"set (mechanism {mechanism!r} requires it)", None)
    return p[name]


def _event_factory(mechanism: str, p: dict) -> tuple[Callable[[float], dp_event.DpEvent], bool]:
    """(noise multiplier -> one-step event, whether the mechanism has a noise multiplier)."""
    if mechanism == "dpsgd":
        q = _require(p, "sample_rate", mechanism)
        return (lambda z: dpsgd_event(sample_rate=q, noise_multiplier=z)), True
    if mechanism == "heterpoisson":
        q_b = _require(p, "q_b", mechanism)
        multiplier = check_real("M", _require(p, "multiplier", mechanism), low=1.0)
        d_max = p.get("max_out_degree")
        if d_max is None:
            if p.get("num_nodes") is None:
                raise InvalidParameterError(
                    "max_out_degree", "a value, or num_nodes (then max_out_degree = num_nodes - 1)",
                    None)
            d_max = p["num_nodes"] - 1
        return (lambda z: heterpoisson_event(
            q_b=q_b, M=multiplier, max_out_degree=d_max, noise_multiplier=z,
            overlap_removal=p.get("overlap_removal", True), mode=p.get("mode", "sound"))), True
    if mechanism == "dpgnn":
        n = _require(p, "num_nodes", mechanism)
        m = _require(p, "batch_size", mechanism)
        k = _require(p, "degree_bound", mechanism)
        return (lambda z: dpgnn_event(num_train=n, batch_size=m, max_degree=k,
                                      noise_multiplier=z, sampling=p.get("sampling", "fixed"))), True
    if mechanism == "gaussian":
        return (lambda z: gaussian_event(noise_multiplier=z)), True
    if mechanism == "laplace":
        return (lambda b: laplace_event(noise_multiplier=b)), True
    eps = _require(p, "epsilon", mechanism)
    return (lambda _: randomized_response_event(epsilon=eps,
                                                num_buckets=p.get("num_buckets", 2))), False


def account(mechanism: str, *, delta: float = 1e-5, steps: int = 1,
            noise_multiplier: float | None = None, target_epsilon: float | None = None,
            accountant: str = "pld", mode: str = "sound", sample_rate: float | None = None,
            q_b: float | None = None, multiplier: float | None = None,
            max_out_degree: int | None = None, num_nodes: int | None = None,
            batch_size: int | None = None, degree_bound: int | None = None,
            sampling: str = "fixed", overlap_removal: bool = True,
            epsilon: float | None = None, num_buckets: int = 2) -> dict[str, Any]:
    """Epsilon after ``steps`` composed steps of ``mechanism``, or the noise for a target.

    Args:
        mechanism: one of `MECHANISMS` (``dpsgd``, ``heterpoisson``, ``dpgnn``,
            ``gaussian``, ``laplace``, ``rr``).
        delta: target delta in [0, 1).
        steps: number of composed steps (>= 1).
        noise_multiplier: noise std over sensitivity (heterpoisson: sigma / clip norm;
            dpgnn: sigma / (2(K+1)C); laplace: scale / sensitivity).
        target_epsilon: calibrate the noise multiplier (one-sided: the epsilon reached never
            exceeds the target) instead of taking it.
        accountant: ``"pld"`` (default, tight) or ``"rdp"``.
        mode: heterpoisson only: ``"sound"`` or ``"paper"`` (Theorem 2's RDP; needs rdp).
        sample_rate: dpsgd: the Poisson sampling rate.
        q_b: heterpoisson: the central sampling rate.
        multiplier: heterpoisson: the neighbour multiplier M.
        max_out_degree: heterpoisson: the largest out-degree D (default ``num_nodes - 1``).
        num_nodes: heterpoisson: |V|; dpgnn: the number of training nodes.
        batch_size: dpgnn: the batch size m.
        degree_bound: dpgnn: the degree bound K.
        sampling: dpgnn: ``"fixed"`` (uniform m-subsets) or ``"poisson"``.
        overlap_removal: heterpoisson: central nodes removed from other subgraphs.
        epsilon: rr (and laplace when no noise multiplier is given): one release's epsilon.
        num_buckets: rr: the domain size k.

    Returns:
        A dict with the keys ``epsilon``, ``delta``, ``noise_multiplier``, ``accountant``,
        ``mechanism``, ``steps``, ``unit`` and ``relation``.

    Raises:
        InvalidParameterError: a missing or invalid parameter (the message names it).

    Example:
        >>> from gnnprivacy.accounting.query import account
        >>> r = account("dpsgd", sample_rate=0.01, target_epsilon=2.0, steps=1000, delta=1e-5)
        >>> r["epsilon"] <= 2.0, r["unit"], r["relation"]      # the noise for a target
        (True, 'node', 'add_or_remove')
    """
    check_choice("mechanism", mechanism, MECHANISMS)
    check_choice("accountant", accountant, ("pld", "rdp"))
    check_choice("mode", mode, ("sound", "paper"))
    steps = check_int("steps", steps, low=1)
    delta = check_probability("delta", delta, allow_one=False)
    if delta > 0:
        check_delta_range("delta", delta)
    p = {"sample_rate": sample_rate, "q_b": q_b, "multiplier": multiplier,
         "max_out_degree": max_out_degree, "num_nodes": num_nodes, "batch_size": batch_size,
         "degree_bound": degree_bound, "sampling": sampling, "overlap_removal": overlap_removal,
         "mode": mode, "epsilon": epsilon, "num_buckets": num_buckets}
    _check_combination(mechanism, p, noise_multiplier, target_epsilon)
    if mode == "paper" and accountant == "pld":
        raise InvalidParameterError("accountant", "'rdp' with mode='paper' (Theorem 2's RDP)",
                                    accountant)
    make_event, has_noise = _event_factory(mechanism, p)
    relation = NeighboringRelation.REPLACE if mechanism == "rr" else None
    if target_epsilon is not None:
        if not has_noise:
            raise InvalidParameterError("target_epsilon", f"None: {mechanism} has no noise multiplier",
                                        target_epsilon)
        noise = calibrate_noise_multiplier(make_event, steps=steps, target_epsilon=target_epsilon,
                                           target_delta=delta, accountant=accountant,
                                           relation=relation)
    elif mechanism == "rr":
        noise = None
    elif mechanism == "laplace" and noise_multiplier is None and epsilon is not None:
        noise = 1.0 / epsilon
    else:
        if noise_multiplier is None:
            raise InvalidParameterError("noise_multiplier", "a value (or target_epsilon)", None)
        noise = noise_multiplier
    event = make_event(noise)
    unit, relation = resolve_scope(event, None, relation)
    acc = make_accountant(accountant, unit=unit, relation=relation)
    acc.compose(event, steps)
    return {"epsilon": acc.get_epsilon(delta), "delta": delta, "noise_multiplier": noise,
            "accountant": accountant, "mechanism": mechanism, "steps": steps,
            "unit": unit.value, "relation": relation.value}
