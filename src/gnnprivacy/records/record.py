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
import re
import subprocess
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


def write_json_atomic(path: str | os.PathLike, obj: Any, *, what: str = "JSON file") -> Path:
    """Write ``obj`` as strict JSON to ``path`` atomically (see `gnnprivacy._files.atomic_write`:
    temp file in the same folder, fsync, rename), so a crash or a full disk never leaves a partial
    file; failures raise `WriteFailedError` naming the file."""
    from gnnprivacy._files import atomic_write

    return atomic_write(path, dumps(obj, indent=2, sort_keys=False), what=what)


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
    #: the run's companion files in its runs directory (``<run_id>.split.npz`` ...): name ->
    #: ``{"sha256", "bytes"}``; written before the record, which readers trust only when they match
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=package_versions)
    git_commit: str | None = field(default_factory=git_commit)
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    record_version: int = RECORD_VERSION

    def __post_init__(self) -> None:
        self.privacy = legacy_privacy_keys(self.privacy)

    @staticmethod
    def new_id(method: str, dataset: str) -> str:
        """``<UTC time>-<method>-<dataset>-<random>``; characters other than letters, digits,
        ``.``, ``_`` and ``-`` become ``_`` (a dataset named ``../../x`` stays a file name)."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        slug = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{method}-{dataset}")[:80]
        return f"{stamp}-{slug}-{uuid.uuid4().hex[:8]}"

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
        return write_json_atomic(Path(runs_dir) / f"{self.run_id}.json", self.to_dict(), what="run record")


#: keys whose value must be a mapping when present (``null`` is read as empty)
_MAPPING_KEYS = ("config", "seeds", "privacy", "metrics", "timings", "split", "info", "versions", "files")
REQUIRED_KEYS = ("run_id", "method", "dataset", "metrics")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def record_problem(data: Any) -> str | None:
    """Why the decoded JSON ``data`` is not a usable run record (``None`` when it is).

    Checked: a JSON object with ``run_id``, ``method``, ``dataset`` (non-empty strings) and
    ``metrics``; ``config``, ``seeds``, ``privacy``, ``metrics``, ``timings``, ``split``,
    ``info``, ``versions`` and ``files`` are mappings; metrics and timings are numbers (or
    null); ``epsilon`` is a number (``"inf"`` decodes to one), ``delta`` a number or null;
    ``seeds.run`` an integer or null; each ``files`` entry has a ``sha256`` and a size.
    """
    if not isinstance(data, dict):
        return f"not a JSON object (a {type(data).__name__})"
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        return f"missing key(s) {', '.join(missing)}"
    for key in ("run_id", "method", "dataset"):
        if not isinstance(data[key], str) or not data[key]:
            return f"{key} is {_short(data[key])}, not a non-empty string"
    for key in _MAPPING_KEYS:
        if data.get(key) is not None and not isinstance(data[key], dict):
            return f"{key} is {_short(data[key])}, not a mapping"
    for section in ("metrics", "timings"):
        for name, value in (data.get(section) or {}).items():
            if value is not None and not _is_number(value):
                return f"{section}.{name} is {_short(value)}, not a number"
    if "epsilon" in data and not _is_number(data["epsilon"]):
        return f"epsilon is {_short(data['epsilon'])}, not a number"
    if "epsilon" in data and not data["epsilon"] >= 0:  # NaN fails too
        return f"epsilon is {_short(data['epsilon'])}, not a privacy budget (>= 0, or inf)"
    if data.get("delta") is not None and not _is_number(data["delta"]):
        return f"delta is {_short(data['delta'])}, not a number or null"
    if data.get("delta") is not None and not 0 <= data["delta"] <= 1:
        return f"delta is {_short(data['delta'])}, not a probability in [0, 1]"
    for name, value in (data.get("metrics") or {}).items():
        if "accuracy" in name and _is_number(value) and not (value != value or 0 <= value <= 1):
            return f"metrics.{name} is {_short(value)}, not an accuracy in [0, 1]"
    run_seed = (data.get("seeds") or {}).get("run")
    if run_seed is not None and (not isinstance(run_seed, int) or isinstance(run_seed, bool)):
        return f"seeds.run is {_short(run_seed)}, not an integer"
    for name, entry in (data.get("files") or {}).items():
        if (not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str)
                or not isinstance(entry.get("bytes"), int) or "/" in name or name.startswith(".")):
            return f"files.{name} is {_short(entry)}, not a {{sha256, bytes}} entry of a file beside the record"
    return None


#: the largest run record read (a record is a few kilobytes; its ledger at most a few megabytes)
MAX_RECORD_BYTES = 64 << 20


def load_record_json(path: str | os.PathLike) -> Any:
    """The decoded JSON of a record file: only a regular file is opened (a FIFO named like a
    record would block every reader), at most `MAX_RECORD_BYTES`, and JSON nested too deep
    for Python's parser is a ``ValueError`` naming it (it raised ``RecursionError``).

    Raises:
        OSError: not a regular file, unreadable or too large; ``ValueError``: not JSON.
    """
    from gnnprivacy._files import read_regular

    raw = read_regular(path, max_bytes=MAX_RECORD_BYTES)
    try:
        return _decode(json.loads(raw.decode("utf-8")))
    except RecursionError:
        raise ValueError("JSON nested too deep to be a run record") from None


def read_record(path: str | os.PathLike) -> RunRecord:
    """Load a record written by `RunRecord.save`.

    Raises:
        InvalidParameterError: the file is not a complete run record (truncated, not JSON,
            missing fields, fields of the wrong type: see `record_problem`); the message
            names the file.
    """
    from gnnprivacy.errors import InvalidParameterError

    try:
        data = load_record_json(path)
        problem = record_problem(data)
        if problem is not None:
            raise ValueError(problem)
        return RunRecord(**data)
    except (ValueError, TypeError, OSError) as exc:
        raise InvalidParameterError("run record", f"a complete JSON run record ({exc})", str(path)) from None
