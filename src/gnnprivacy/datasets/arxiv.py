"""ogbn-arxiv through OGB's PyG dataset class (optional dependency ``ogb``).

Layout under the data root (as OGB extracts it): ``ogbn_arxiv/raw/*.csv.gz`` and
``ogbn_arxiv/split/time/{train,valid,test}.csv.gz``. The graph is directed in OGB; it is
symmetrised by ``load_dataset``. The public split is OGB's time split.

Not exercised offline (``ogb`` is not installed in the development environment).
"""

from __future__ import annotations

from pathlib import Path

OGB_VERSION_FILE = "RELEASE_v1.txt"  # OGB asks interactively when this marker is missing


def _write_release_marker(entry: Path) -> None:
    marker = entry / OGB_VERSION_FILE
    if not marker.exists():
        marker.write_text("ogbn-arxiv (marker written by gnnprivacy for a linked data root)\n")


def load_arxiv(ctx):
    """Load ogbn-arxiv with its time split as boolean masks.

    Raises:
        ModuleNotFoundError: ``ogb`` is not installed.
        DatasetNotFoundError: raw files missing (see ``dataset_info('ogbn-arxiv')``).
    """
    try:
        from ogb.nodeproppred import PygNodePropPredDataset
    except ImportError as exc:
        raise ModuleNotFoundError(
            "dataset 'ogbn-arxiv' needs the optional 'ogb' package, which is not installed "
            "(pip install ogb)", name="ogb") from exc
    import torch

    from gnnprivacy.datasets.pyg_cache import PygSource, load_pyg_dataset
    from gnnprivacy.datasets.spec import registered_info

    required = tuple(f.split("/", 1)[1] for f in registered_info("ogbn-arxiv").raw_files)
    source = PygSource(subdir="ogbn_arxiv", required=required,
                       factory=lambda r: PygNodePropPredDataset("ogbn-arxiv", root=r),
                       links=("raw", "split", OGB_VERSION_FILE), prepare=_write_release_marker,
                       reuse_built=False)
    dataset = load_pyg_dataset(ctx, source)
    data = dataset[0]
    n = data.num_nodes
    for key, part in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[dataset.get_idx_split()[part]] = True
        data[key] = mask
    return data
