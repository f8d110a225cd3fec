"""German credit preprocessing for RGNN: every attribute binarised with public, fixed bins.

Bhaila et al., SDM 2024, Section V-A; spec 004 §10.1 (taken from the authors' code). GRR-FS
needs categorical features with public domains, and bins computed from quantiles of the
private data would leak, so the continuous attributes are cut at fixed, data-independent
thresholds and one-hot encoded. Input: the 37 attributes of ``load_dataset("german")``
(``features="rgnn"``: ``OtherLoansAtStore`` and the label dropped, ``Gender`` as 0/1,
``PurposeOfLoan`` one-hot over its 10 categories, numeric columns raw), named by
``data.feature_names``. Then:

* ``NumberOfLiableIndividuals - 1`` (1/2 -> 0/1); ``LoanRateAsPercentOfIncome >= 3``,
  ``YearsAtCurrentHome >= 3``, ``NumberOfOtherLoansAtBank > 1`` -> 0/1;
* ``Age`` bins ``{<=30, (30,50], >50}``; ``LoanDuration`` bins ``{<=10, (10,20], (20,30], >30}``;
  ``LoanAmount`` bins ``{<=1000, (1000,2000], (2000,3000], (3000,4000], >4000}``, one-hot;
* every other attribute is already 0/1 and kept.

That gives ``34 + 3 + 4 + 5 = 46`` binary features (sparsity on the 1,000 clients: the
paper reports 74.2% on its 955; 74.9% here, Gender coded Female = 1 as in the loader).

Data caveat: the paper's German graph is the authors' semi-synthetic similarity graph (955
nodes, 9,900 edges; not available here). The project's ``german`` dataset is the NIFTY graph
(Agarwal et al., UAI 2021) over all 1,000 clients (21,742 edges) with the same UCI columns, so
the features follow the paper but the graph does not: results are not comparable cell by cell
(`GRAPH_CAVEAT`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from gnnprivacy.errors import InvalidParameterError

#: Fixed upper bin edges (right-closed); a last open bin collects everything above.
BINS = {"Age": (30, 50), "LoanDuration": (10, 20, 30), "LoanAmount": (1000, 2000, 3000, 4000)}

#: Ordinal attributes turned into one indicator each: (name, new name, test).
THRESHOLDS = (
    ("NumberOfLiableIndividuals", "NumberOfLiableIndividuals_minus_1", lambda v: v - 1 > 0),
    ("LoanRateAsPercentOfIncome", "LoanRateAsPercentOfIncome_geq_3", lambda v: v >= 3),
    ("YearsAtCurrentHome", "YearsAtCurrentHome_geq_3", lambda v: v >= 3),
    ("NumberOfOtherLoansAtBank", "NumberOfOtherLoansAtBank_gt_1", lambda v: v > 1),
)

NUM_GERMAN_ATTRIBUTES = 37
NUM_GERMAN_FEATURES = 46

GRAPH_CAVEAT = ("german: the paper's semi-synthetic German graph (955 nodes, 9,900 edges, authors' "
                "pickle) is not available; the NIFTY German credit graph (1,000 nodes, 21,742 "
                "edges) is used with the paper's feature preprocessing, so numbers are not "
                "directly comparable with Table II.")


def _bin_labels(edges: Sequence[float]) -> list[str]:
    inner = [f"({a},{b}]" for a, b in zip(edges, edges[1:])]
    return [f"<={edges[0]}", *inner, f">{edges[-1]}"]


def binarize_german(x: Tensor, feature_names: Sequence[str]) -> tuple[Tensor, list[str]]:
    """The 46 binary features of spec 004 §10.1 from the 37 German credit attributes.

    Args:
        x: ``(N, 37)`` attributes as loaded by ``load_dataset("german")`` (raw numeric values).
        feature_names: the 37 column names (``data.feature_names``).

    Returns:
        ``(x_bin, names)``: ``(N, 46)`` float32 tensor of 0/1 entries and the feature names.

    Raises:
        InvalidParameterError: wrong shape, a missing column, or a column expected to be 0/1
            holding other values.
    """
    names = list(feature_names)
    if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) != len(names):
        raise InvalidParameterError("x", f"a 2-D tensor with {len(names)} columns (one per name)",
                                    tuple(x.shape) if isinstance(x, Tensor) else type(x))
    special = set(BINS) | {t[0] for t in THRESHOLDS}
    missing = sorted(special - set(names))
    if missing or len(names) != NUM_GERMAN_ATTRIBUTES:
        raise InvalidParameterError("feature_names", f"the {NUM_GERMAN_ATTRIBUTES} German credit "
                                    "attributes of load_dataset('german', features='rgnn')",
                                    missing or len(names))
    col = {n: x[:, i].to(torch.float64) for i, n in enumerate(names)}
    out: list[Tensor] = []
    out_names: list[str] = []
    for n in names:
        if n in special:
            continue
        if ((col[n] != 0) & (col[n] != 1)).any():
            raise InvalidParameterError(f"x[:, {n!r}]", "a 0/1 attribute", "other values")
        out.append(col[n])
        out_names.append(n)
    for n, new, test in THRESHOLDS:
        out.append(test(col[n]).to(torch.float64))
        out_names.append(new)
    for n, edges in BINS.items():
        idx = torch.bucketize(col[n], torch.tensor(edges, dtype=torch.float64), right=False)
        out.extend(torch.nn.functional.one_hot(idx, len(edges) + 1).to(torch.float64).T)
        out_names.extend(f"{n}{lab}" for lab in _bin_labels(edges))
    return torch.stack(out, dim=1).to(torch.float32), out_names


__all__ = ["BINS", "GRAPH_CAVEAT", "NUM_GERMAN_ATTRIBUTES", "NUM_GERMAN_FEATURES", "THRESHOLDS",
           "binarize_german"]
