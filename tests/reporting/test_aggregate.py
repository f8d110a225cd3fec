"""Aggregation over seeds: summaries, confidence intervals (coverage), grouping."""

import math

import numpy as np
import pytest

from gnnprivacy.records.store import ResultStore
from gnnprivacy.reporting.aggregate import Summary, constant_keys, group_rows, summarize, varying_keys


def test_summary_values_against_numpy_and_the_t_table():
    xs = [0.71, 0.74, 0.69]
    s = summarize(xs)
    assert s.n == 3 and s.mean == pytest.approx(np.mean(xs)) and s.std == pytest.approx(np.std(xs, ddof=1))
    t_975_2 = 4.302652729911275  # Student t, 2 degrees of freedom, 97.5% quantile (tables)
    assert s.half_width == pytest.approx(t_975_2 * s.std / math.sqrt(3))
    one = summarize([0.5, float("nan")])
    assert one.n == 1 and one.mean == 0.5 and math.isnan(one.std) and math.isnan(one.ci_low)
    assert summarize([]).n == 0


def _coverage(interval, rng, n=5, trials=4000):
    hits = 0
    for _ in range(trials):
        xs = rng.normal(0.7, 0.05, size=n)
        lo, hi = interval(list(xs))
        hits += lo <= 0.7 <= hi
    return hits / trials


@pytest.mark.statistical
def test_confidence_interval_covers_the_mean_95_percent_of_the_time():
    trials = 4000
    tol = 4 * math.sqrt(0.95 * 0.05 / trials)  # 4 binomial standard errors

    def ours(xs):
        s = summarize(xs)
        return s.ci_low, s.ci_high

    def broken_normal_quantile(xs):  # positive control: z = 1.96 ignores the small sample (n = 5)
        s = summarize(xs)
        half = 1.96 * s.std / math.sqrt(s.n)
        return s.mean - half, s.mean + half

    assert abs(_coverage(ours, np.random.default_rng(0), trials=trials) - 0.95) < tol
    assert abs(_coverage(broken_normal_quantile, np.random.default_rng(0), trials=trials) - 0.95) > tol


def test_group_rows_over_seeds(table2_runs):
    runs, means = table2_runs
    groups = group_rows(ResultStore(runs).rows())
    assert len(groups) == 2 * 2 * 2 + 2  # (heterpoisson, dpmlp) x datasets x eps + gcn per dataset
    assert all(g.n == 3 for g in groups)
    g = next(g for g in groups if g.attrs["method"] == "heterpoisson" and g.attrs["dataset"] == "computers"
             and g.attrs["epsilon"] == 16.0)
    assert abs(g.metrics["test_accuracy"].mean - means[("computers", "heterpoisson", 16.0)]) < 0.03
    assert "seed" not in g.attrs and "runs_dir" not in g.attrs and g.attrs["private"] is True
    assert g.epsilon.mean == 16.0 and g.delta == 1e-5
    gcn = next(g for g in groups if g.attrs["method"] == "gcn")
    assert math.isinf(gcn.epsilon.mean) and gcn.delta is None
    assert varying_keys(groups) == ["dataset", "method", "epsilon"]  # backbone: implied by the method
    assert constant_keys(groups, ("epsilon", "lr")) == {}
    assert constant_keys([g for g in groups if g.attrs.get("epsilon") == 4.0], ("epsilon",)) == {"epsilon": 4}


def test_failed_rows_are_not_aggregated():
    rows = [{"run_id": "a", "status": "ok", "method": "m", "dataset": "d", "config.seed": 0,
             "metrics.test_accuracy": 0.5},
            {"run_id": "b", "status": "failed", "method": "m", "dataset": "d", "config.seed": 1}]
    (g,) = group_rows(rows)
    assert g.run_ids == ["a"] and isinstance(g.metrics["test_accuracy"], Summary)


def test_a_hyperparameter_varying_within_a_method_is_shown():
    def row(i, method, **cfg):
        return {"run_id": str(i), "method": method, "dataset": "d", "metrics.test_accuracy": 0.5,
                **{f"config.{k}": v for k, v in cfg.items()}}

    rows = [row(0, "heterpoisson", backbone="gcn", epsilon=4.0), row(1, "heterpoisson", backbone="gin", epsilon=4.0),
            row(2, "dpmlp", epsilon=4.0, layers=4)]
    assert varying_keys(group_rows(rows)) == ["method", "backbone"]  # layers: constant within dpmlp
