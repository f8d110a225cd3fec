"""One JSON record per run: resolved config, seeds, versions, git commit, privacy ledger,
metrics and timings.

JSON has no infinity: non-finite floats are written as the strings ``"inf"``, ``"-inf"``
and ``"nan"`` (so the file stays strict JSON) and read back as floats by `read_record`.
A non-private run records ``epsilon = "inf"``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

RECORD_VERSION = 1
_PACKAGES = ("gnnprivacy", "torch", "torch_geometric", "numpy", "scipy", "scikit-learn", "dp-accounting")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that determine a run's result."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def git_commit(source: str | os.PathLike | None = None) -> str | None:
    """The git commit of gnnprivacy's own source tree, or ``None``.

    The commit is recorded only when the repository around the package *tracks* the package's
    file: a gnnprivacy installed into a virtualenv inside some other git repository (the
    user's project) gets ``None``, not that repository's commit. ``+dirty`` is appended when
    tracked files have uncommitted changes.

    Args:
        source: a file of the package (default: this module); its repository is asked.

    Returns:
        The commit hash (with ``+dirty``), or ``None`` outside a checkout of gnnprivacy.
    """
    source = Path(source) if source else Path(__file__).resolve()
    where = source.parent

    def git(*args: str, check: bool = True) -> str:
        return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True,
                              timeout=5, check=check).stdout.strip()

    try:
        git("ls-files", "--error-unmatch", "--", source.name)   # fails: not our source tree
        sha = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def _encode(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        return _encode(obj.item())
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _decode(obj: Any) -> Any:
    if isinstance(obj, str) and obj in ("inf", "-inf", "nan"):
        return float(obj)
    if isinstance(obj, dict):
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs) -> str:
    """Strict JSON (non-finite floats as strings)."""
    return json.dumps(_encode(obj), allow_nan=False, **kwargs)


def apply_umask(path: str | os.PathLike) -> None:
    """Give ``path`` (a temporary file, created 0600) the mode a new file gets under the umask."""
    current = os.umask(0)
    os.umask(current)
    os.chmod(path, 0o666 & ~current)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (temp file in the same folder, fsync, rename),
    so a crash never leaves a partial record; the file gets the user's umask permissions."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(dumps(obj, indent=2, sort_keys=False))
            fh.flush()
            os.fsync(fh.fileno())
        apply_umask(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


#: old privacy key -> its name now (records written before the rename stay readable)
LEGACY_PRIVACY_KEYS = {"sigma": "noise_std"}


def legacy_privacy_keys(privacy: dict[str, Any]) -> dict[str, Any]:
    """``privacy`` with old key names replaced by the current ones.

    Noise is named as Opacus names it: ``noise_multiplier`` is the noise std over the clip
    norm (sensitivity), ``noise_std`` the absolute std. Records before issue 25 called the
    absolute std ``sigma``, which Opacus users read as the multiplier.

    Args:
        privacy: a record's ``privacy`` mapping, as written or as read from an old file.

    Returns:
        A new dict (the input is not modified) with ``noise_std`` instead of ``sigma``.
    """
    out = dict(privacy)
    for old, new in LEGACY_PRIVACY_KEYS.items():
        if old in out:
            value = out.pop(old)
            out.setdefault(new, value)
    return out


@dataclass
class RunRecord:
    """Everything needed to understand and reproduce one run.

    *Privacy*: the record states what was spent (``epsilon`` at ``delta``, the ledger, the unit
    and relation in ``privacy``) and what is not covered (``privacy["unaccounted"]``).

    Example:
        >>> import tempfile
        >>> import gnnprivacy as gp
        >>> runs = tempfile.mkdtemp()
        >>> result = gp.train("csbm", method="gcn", epochs=5, dataset_args="num_nodes=1000", runs_dir=runs)
        >>> record = gp.read_record(f"{runs}/{result.record.run_id}.json")
        >>> record.method, record.epsilon, record.privacy["private"]
        ('gcn', inf, False)
    """

    run_id: str
    method: str
    dataset: str
    config: dict[str, Any]
    seeds: dict[str, Any]
    epsilon: float
    delta: float | None
    privacy: dict[str, Any]
    metrics: dict[str, float]
    timings: dict[str, float]
    split: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    #: what the run's reader should know (e.g. a split with fewer than 500 training nodes)
    warnings: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=package_versions)
    git_commit: str | None = field(default_factory=git_commit)
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    record_version: int = RECORD_VERSION

    def __post_init__(self) -> None:
        self.privacy = legacy_privacy_keys(self.privacy)

    @staticmethod
    def new_id(method: str, dataset: str) -> str:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        return f"{stamp}-{method}-{dataset}-{uuid.uuid4().hex[:8]}"

    def to_dict(self) -> dict[str, Any]:
        return _encode(asdict(self))

    def summary(self) -> dict[str, Any]:
        """The machine-readable result printed by ``--json``."""
        return {
            "method": self.method,
            "dataset": self.dataset,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "test_accuracy": self.metrics.get("test_accuracy"),
            "seconds": self.timings.get("total_seconds"),
            "run_id": self.run_id,
            "metrics": self.metrics,
            "privacy": {k: v for k, v in self.privacy.items() if k != "ledger"},
            **({"warnings": self.warnings} if self.warnings else {}),
        }

    def save(self, runs_dir: str | os.PathLike) -> Path:
        """Write ``<runs_dir>/<run_id>.json`` atomically."""
        return write_json_atomic(Path(runs_dir) / f"{self.run_id}.json", self.to_dict())


def read_record(path: str | os.PathLike) -> RunRecord:
    """Load a record written by `RunRecord.save`.

    Raises:
        InvalidParameterError: the file is not a complete run record (truncated, not JSON,
            missing fields); the message names the file.
    """
    from gnnprivacy.errors import InvalidParameterError

    try:
        data = _decode(json.loads(Path(path).read_text(encoding="utf-8")))
        return RunRecord(**data)
    except (ValueError, TypeError) as exc:
        raise InvalidParameterError("run record", f"a complete JSON run record ({exc})", str(path)) from None
