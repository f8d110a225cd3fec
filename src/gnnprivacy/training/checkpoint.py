"""Checkpoints of a private training run, written atomically, so a killed run can resume.

A checkpoint holds everything the step loop needs to continue exactly where it stopped:
the model and optimizer states, the states of the random generators (the initial ones,
so the data-dependent set-up before training is rebuilt identically, and the current
ones), the number of executed noisy steps and the accountant's ledger. It is written to
a private temporary file beside ``<path>``, flushed and ``fsync``-ed, then renamed over
``<path>`` (``os.replace`` is atomic on POSIX), so a SIGKILL at any moment leaves either
the previous checkpoint or the new one, never a torn file.

*Privacy.* A checkpoint contains the generator states (hence, outside secure mode, every
future noise draw) and the unreleased model: it is as sensitive as the training data.
On resume the accountant is rebuilt by composing the recorded per-step event exactly
``step`` times and checked against the saved ledger, so no executed step is lost or
counted twice; steps run after the last checkpoint and before the kill were never
released and are executed again (with the same randomness) after the resume.

*Reading runs no code.* A checkpoint holds tensors and plain values only and is read with
``torch.load(weights_only=True)`` (`read_weights_only`) before any other check: a crafted file
with a pickled object (``os.system`` ...) is refused with one line naming that object, never
run, and not blamed on the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from gnnprivacy.errors import InvalidParameterError

__all__ = ["CHECKPOINT_VERSION", "CheckpointWarning", "fingerprint", "load_checkpoint", "read_weights_only",
           "save_checkpoint"]

CHECKPOINT_VERSION = 1


def fingerprint(payload: dict[str, Any]) -> str:
    """A short stable hash of a JSON-able description (configuration and data shape)."""
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path | None:
    """Write ``state`` to ``path`` atomically (`gnnprivacy._files.atomic_write`: a private
    temporary file, fsync, rename), so two processes checkpointing the same path never collide.

    A checkpoint is a safety net, not a result: where it cannot be written (a full disk, a
    read-only folder) a `CheckpointWarning` says so, the previous checkpoint stays as it
    was, training goes on and ``None`` is returned.
    """
    import io
    import warnings

    from gnnprivacy._files import atomic_write

    buffer = io.BytesIO()  # serialised in memory: torch's zip writer hides ENOSPC in a RuntimeError
    torch.save({"version": CHECKPOINT_VERSION, **state}, buffer)
    try:
        return atomic_write(path, buffer.getvalue(), what="checkpoint")
    except OSError as exc:
        warnings.warn(f"{exc}; training goes on without this checkpoint (a kill now loses the "
                      "steps since the last one)", CheckpointWarning, stacklevel=2)
        return None


def read_weights_only(path: str | os.PathLike, *, name: str, expected: str) -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU: tensors, containers and plain values
    only, so a planted pickle payload is refused and never runs.

    Raises:
        InvalidParameterError: ``name`` must be ``expected``; received the path and one line
            saying why it did not load (the code object it names, a torn archive ...).
    """
    import warnings

    from gnnprivacy.datasets.pickles import load_error_line

    path = Path(path)
    if not path.is_file():
        raise InvalidParameterError(name, expected, f"{path} (not a regular file)")
    try:
        with warnings.catch_warnings():  # "protocol N" notices: the error says what matters
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets one clear line
        raise InvalidParameterError(name, expected, f"{path}: {load_error_line(exc, path)}") from None


class CheckpointWarning(UserWarning):
    """A checkpoint could not be written; training continued without it."""


def load_checkpoint(path: str | os.PathLike, *, expected_fingerprint: str | None = None
                    ) -> dict[str, Any] | None:
    """The checkpoint at ``path``, or ``None`` when there is none.

    Raises:
        InvalidParameterError: the file is unreadable, of another version, or was written
            by a run with another configuration or data (``expected_fingerprint``).
    """
    path = Path(path)
    if not path.is_file():
        return None
    state = read_weights_only(path, name="checkpoint", expected="a readable training checkpoint "
                              "written by gnnprivacy (tensors and plain values only)")
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        raise InvalidParameterError("checkpoint", f"a version-{CHECKPOINT_VERSION} checkpoint",
                                    str(path))
    if expected_fingerprint is not None and state.get("fingerprint") != expected_fingerprint:
        raise InvalidParameterError(
            "checkpoint", "a checkpoint of the same configuration and data (resume refuses "
            "to continue another run)", f"{path} (fingerprint {state.get('fingerprint')}, "
            f"expected {expected_fingerprint})")
    return state
