"""Training algorithms (estimator-like: ``fit(data) -> self``, ``predict``) and metrics."""

from gnnprivacy.training.metrics import accuracy, evaluate, macro_f1, roc_auc
from gnnprivacy.training.nonprivate import FullBatchTrainer, MiniBatchTrainer

__all__ = ["FullBatchTrainer", "MiniBatchTrainer", "accuracy", "evaluate", "macro_f1", "roc_auc"]
