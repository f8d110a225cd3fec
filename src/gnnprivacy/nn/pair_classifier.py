"""The pair classifier of He et al.'s link-stealing attacks (also MemGuard's defender classifier) and the
K-means decision rule of the unsupervised attacks.

* `AttackMLP`: Dense(32, ReLU) -> Dropout(0.5) -> Dense(32, ReLU) -> Dropout(0.5) ->
  Dense(2), cross-entropy, Adam (lr 1e-3), 50 epochs, batch 128 (64 for Attack-6), features
  standardised (spec 003 §3.1). ``scaler_mode="train_only"`` (default) fits the scaler on the
  training pairs only; ``"separate"`` reproduces the reference code, which fits a second scaler
  on the test pairs (``fit_transform`` on test).
* `kmeans_decisions`: K-means with K = 2 on 1-D distances; the cluster with the lower
  mean distance is "linked".
"""

from __future__ import annotations

import numpy as np

from gnnprivacy._validation import check_choice, check_int, check_positive
from gnnprivacy.errors import InvalidParameterError

__all__ = ["AttackMLP", "SCALER_MODES", "kmeans_decisions"]

SCALER_MODES = ("train_only", "separate")


def _standardise(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    return (x - mean) / np.where(std > 0, std, 1.0)


class AttackMLP:
    """He et al.'s 32-32 attack MLP on standardised pair features (estimator style).

    Args:
        epochs: training epochs (50 in the paper's code).
        batch_size: minibatch size (128).
        lr: Adam learning rate (1e-3).
        scaler_mode: ``"train_only"`` (sound default) or ``"separate"`` (reference code).
        seed: seeds initialisation, dropout and shuffling (the global RNG is untouched).
    """

    def __init__(self, *, epochs: int = 50, batch_size: int = 128, lr: float = 1e-3,
                 hidden: int = 32, dropout: float = 0.5, scaler_mode: str = "train_only",
                 seed: int = 0):
        self.epochs = check_int("epochs", epochs, low=1)
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.lr = check_positive("lr", lr)
        self.hidden = check_int("hidden", hidden, low=1)
        self.dropout = dropout
        self.scaler_mode = check_choice("scaler_mode", scaler_mode, SCALER_MODES)
        self.seed = check_int("seed", seed, low=0)

    def fit(self, x, y) -> "AttackMLP":
        import torch

        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.int64).reshape(-1)
        if x.ndim != 2 or x.shape[0] != y.size or y.size == 0:
            raise InvalidParameterError("x, y", "a non-empty (P, d) feature matrix and P labels",
                                        (x.shape, y.shape))
        self.mean_, self.std_ = x.mean(0), x.std(0)
        xs = torch.from_numpy(_standardise(x, self.mean_, self.std_)).float()
        ys = torch.from_numpy(y)
        gen = torch.Generator().manual_seed(self.seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            h, p = self.hidden, self.dropout
            self.model_ = torch.nn.Sequential(
                torch.nn.Linear(x.shape[1], h), torch.nn.ReLU(), torch.nn.Dropout(p),
                torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Dropout(p), torch.nn.Linear(h, 2))
            opt = torch.optim.Adam(self.model_.parameters(), lr=self.lr)
            self.model_.train()
            for _ in range(self.epochs):
                perm = torch.randperm(ys.numel(), generator=gen)
                for start in range(0, ys.numel(), self.batch_size):
                    idx = perm[start:start + self.batch_size]
                    opt.zero_grad()
                    loss = torch.nn.functional.cross_entropy(self.model_(xs[idx]), ys[idx])
                    loss.backward()
                    opt.step()
        self.model_.eval()
        return self

    def predict_proba(self, x) -> np.ndarray:
        """P(link) per pair."""
        import torch

        x = np.asarray(x, dtype=np.float64)
        if self.scaler_mode == "separate":
            xs = _standardise(x, x.mean(0), x.std(0))
        else:
            xs = _standardise(x, self.mean_, self.std_)
        with torch.no_grad():
            out = torch.softmax(self.model_(torch.from_numpy(xs).float()), dim=1)[:, 1]
        return out.double().numpy()


def kmeans_decisions(distance, *, seed: int = 0) -> np.ndarray:
    """0/1 decisions from K-means (K = 2) on 1-D distances: the lower-mean cluster is linked.

    A constant input (one cluster) predicts every pair as linked.
    """
    from sklearn.cluster import KMeans

    d = np.asarray(distance, dtype=np.float64).reshape(-1, 1)
    if d.size < 2 or np.ptp(d) == 0:
        return np.ones(d.shape[0], dtype=np.int64)
    km = KMeans(n_clusters=2, n_init=10, random_state=int(seed) % (2**32)).fit(d)
    centers = km.cluster_centers_.reshape(-1)
    return (km.labels_ == int(np.argmin(centers))).astype(np.int64)
