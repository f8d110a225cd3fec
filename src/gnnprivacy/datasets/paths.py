"""Where raw datasets are read from (the data root) and where PyG may write (the cache).

* Data root: the ``root`` argument, else ``$GNNPRIVACY_DATA``, else ``~/.cache/gnnprivacy``.
  It holds raw files in PyG's layout (``Cora/raw/ind.cora.x`` ...) and is never written to:
  it may be read-only or shared.
* Cache: ``$GNNPRIVACY_CACHE``, else ``~/.cache/gnnprivacy/pyg``. Each data root gets its own
  sub-folder, named by a hash of its resolved path (so two roots never mix), holding one
  PyG dataset folder per dataset whose ``raw`` is a symlink (or copy) of the root's.

No torch import here.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from gnnprivacy.errors import InvalidParameterError

DATA_ENV = "GNNPRIVACY_DATA"
CACHE_ENV = "GNNPRIVACY_CACHE"
DEFAULT_ROOT = Path("~/.cache/gnnprivacy")
DEFAULT_CACHE = Path("~/.cache/gnnprivacy/pyg")


@dataclass(frozen=True)
class DataRoot:
    """A resolved data root and how it was chosen.

    Attributes:
        path: absolute, resolved path (may not exist when ``source == "default"``).
        source: ``"argument"``, ``"env"`` (``$GNNPRIVACY_DATA``) or ``"default"``.
    """

    path: Path
    source: str

    def describe(self) -> str:
        """Human-readable origin, with how to change it."""
        how = {"argument": "given as root= / --data-root",
               "env": f"from ${DATA_ENV}",
               "default": f"the default; set root=, --data-root or ${DATA_ENV} to change it"}
        return f"{self.path} ({how[self.source]})"


def resolve_root(root: str | os.PathLike | None = None) -> DataRoot:
    """Resolve the data root: ``root``, else ``$GNNPRIVACY_DATA``, else ``~/.cache/gnnprivacy``.

    An explicitly chosen root (argument or environment) must be an existing directory; the
    default root may be absent (then every dataset is simply missing).

    Raises:
        InvalidParameterError: an explicit root that is not an existing directory (the
            message names ``root`` / ``--data-root`` or the environment variable).
    """
    if root is not None:
        name, source, raw = "root (--data-root)", "argument", root
    elif os.environ.get(DATA_ENV):
        name, source, raw = f"${DATA_ENV}", "env", os.environ[DATA_ENV]
    else:
        return DataRoot(DEFAULT_ROOT.expanduser().resolve(), "default")
    try:
        path = Path(raw).expanduser().resolve()
    except (TypeError, OSError) as exc:
        raise InvalidParameterError(name, "a path to an existing directory", raw) from exc
    if not path.is_dir():
        raise InvalidParameterError(
            name, "an existing directory holding raw datasets in PyG's layout", str(raw))
    return DataRoot(path, source)


def resolve_cache(cache_dir: str | os.PathLike | None = None) -> Path:
    """The PyG cache folder: ``cache_dir``, else ``$GNNPRIVACY_CACHE``, else ``~/.cache/gnnprivacy/pyg``."""
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    return Path(cache_dir).expanduser().resolve()


def root_key(root: Path) -> str:
    """16 hex digits of sha256 of the resolved root path: the cache sub-folder name."""
    return hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:16]


def root_cache_dir(cache: Path, root: Path) -> Path:
    """The cache sub-folder reserved for ``root`` (``<cache>/<root_key>/pyg-<version>``).

    The PyG version is part of the path because processed files are version-specific.
    """
    import importlib.metadata as md

    try:
        version = md.version("torch_geometric")
    except md.PackageNotFoundError:  # pragma: no cover - PyG is a hard dependency
        version = "unknown"
    return cache / root_key(root) / f"pyg-{version}"


def missing_files(root: Path, relative_paths: tuple[str, ...] | list[str]) -> list[str]:
    """The entries of ``relative_paths`` that are not regular files under ``root``."""
    return [p for p in relative_paths if not (root / p).is_file()]


@dataclass(frozen=True)
class LoadContext:
    """What a registered loader needs besides its own keyword arguments.

    Attributes:
        name: registry name of the dataset being loaded.
        root: the resolved data root (read only, never written).
        cache: the resolved cache folder (PyG writes ``processed/`` there).
        download: whether PyG may try to download missing raw files into the cache.
    """

    name: str
    root: DataRoot
    cache: Path
    download: bool = True

    @property
    def cache_base(self) -> Path:
        """The cache sub-folder of this root (see `root_cache_dir`)."""
        return root_cache_dir(self.cache, self.root.path)
