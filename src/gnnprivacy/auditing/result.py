"""`AuditResult`: the outcome of one audit, whatever its mode (the audit modules return it and
`gnnprivacy.auditing.api` re-exports it)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["AuditResult"]


@dataclass
class AuditResult:
    """Outcome of one audit (JSON-able through `to_dict`).

    Attributes:
        method, dataset, mode: what was audited and how.
        epsilon_claimed: the ε the method claims at ``delta``.
        epsilon_lower_bound: Clopper-Pearson lower bound (max over canary variants), or the
            exact ε for local methods.
        epsilon_estimate_gdp: the GDP-based (Nasr et al. 2023) estimate (assumes a Gaussian
            trade-off curve: not a bound; ``None`` for exact audits). Records before issue
            22 called it ``epsilon_lower_bound_gdp`` (`from_dict` reads both).
        runs: runs per world (0 for exact audits).
        confidence: two-sided confidence of the Clopper-Pearson bounds (1 for exact audits).
        delta: δ of the claim.
        mia_accuracy, mia_auc: the canary-membership attack on the same observations.
        violation: ``epsilon_lower_bound > epsilon_claimed`` (a privacy bug, or a deliberate
            positive control).
        heuristic: the figure rests on an assumption (paper-literal GDP composition).
        details: per-variant results and the configuration facts.
    """

    method: str
    dataset: str
    mode: str
    epsilon_claimed: float
    epsilon_lower_bound: float
    epsilon_estimate_gdp: float | None
    runs: int
    confidence: float
    delta: float
    mia_accuracy: float | None = None
    mia_auc: float | None = None
    noise_scale: float = 1.0
    heuristic: bool = False
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def epsilon_lower_bound_gdp(self) -> float | None:
        """The GDP estimate under its name before issue 22 (it is not a bound)."""
        return self.epsilon_estimate_gdp

    @property
    def violation(self) -> bool:
        """The bound exceeds the claim, or (code mode) a boundary check failed."""
        return (self.epsilon_lower_bound > self.epsilon_claimed + 1e-9
                or bool(self.details.get("failed_checks")))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["violation"] = self.violation
        return _jsonable(out)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditResult:
        """Inverse of `to_dict`; also reads records that named the GDP estimate
        ``epsilon_lower_bound_gdp`` (before issue 22)."""
        from gnnprivacy.auditing.bounds import OLD_GDP_KEY

        fields_ = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in data.items() if k in fields_}
        if "epsilon_estimate_gdp" not in kw and OLD_GDP_KEY in data:
            kw["epsilon_estimate_gdp"] = data[OLD_GDP_KEY]
        for key in ("epsilon_claimed", "epsilon_lower_bound", "epsilon_estimate_gdp"):
            if isinstance(kw.get(key), str):          # "inf" as _jsonable writes it
                kw[key] = float(kw[key])
        return cls(**kw)

    def _boundary_line(self) -> str:
        """The code audit's boundary checks: how many were made and passed, and each failure."""
        checks = [c for per in self.details.get("checks", []) for c in per.values()
                  if c.get("checked")]
        published = self.details.get("publication")
        if published and published.get("checked"):       # what the run publishes
            checks.append(published)
        over = self.epsilon_lower_bound > self.epsilon_claimed + 1e-9
        if not checks:
            return "  ** EXCEEDS THE CLAIM **" if over else ""
        failed = self.details.get("failed_checks", [])
        return (f"; boundary checks: {len(checks) - len(failed)} of {len(checks)} passed"
                + ("  ** EXCEEDS THE CLAIM **" if over else "")
                + ("  ** A BOUNDARY CHECK FAILED **" if failed else "")
                + "".join(f"\n  FAILED {f}" for f in failed))

    def summary(self) -> str:
        if self.mode == "code":
            parts = [f"noise x{e['noise_factor']:.3f}, clip {e['clip']:.3g} "
                     f"(planned {e['planned_clip_norm']:.3g}), batch x{e['rate_factor']:.3f}"
                     for e in self.details.get("engines", []) if e.get("measured")]
            return (f"{self.method} on {self.dataset} (code): claimed epsilon "
                    f"{self.epsilon_claimed:.3f} at delta {self.delta:.3g}; the executed code "
                    f"spends at least {self.epsilon_lower_bound:.3f} ({self.confidence:.1%} "
                    f"per measured parameter; {self.runs} noisy steps observed: "
                    + "; ".join(parts) + ")" + self._boundary_line())
        gdp = ("n/a" if self.epsilon_estimate_gdp is None
               else f"{self.epsilon_estimate_gdp:.3f}")
        return (f"{self.method} on {self.dataset} ({self.mode}): claimed epsilon "
                f"{self.epsilon_claimed:.3f} at delta {self.delta:.3g}; "
                + (f"exact epsilon {self.epsilon_lower_bound:.3f} (enumeration)"
                   if self.mode == "exact" else
                   f"lower bound {self.epsilon_lower_bound:.3f} (Clopper-Pearson, "
                   f"{self.confidence:.0%}), GDP estimate {gdp} (not a bound); {self.runs} "
                   "runs per world")
                + ("  ** EXCEEDS THE CLAIM **" if self.violation else ""))


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        return _jsonable(v.item())
    if hasattr(v, "__dataclass_fields__"):
        return _jsonable(asdict(v))
    return v
