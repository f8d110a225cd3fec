"""Typed errors. Every error about user input subclasses `ValueError`."""

from __future__ import annotations

__all__ = ["BudgetExceededError", "CorruptDatasetError", "DatasetNotFoundError", "GnnPrivacyError",
           "InvalidParameterError", "PrivacyUnitMismatchError", "SmallSplitWarning",
           "UnknownNameError"]


class GnnPrivacyError(Exception):
    """Base class of every error raised by gnnprivacy."""


class InvalidParameterError(GnnPrivacyError, ValueError):
    """A parameter is outside its valid range or of the wrong kind.

    The message always names the parameter, what was expected and what was received.
    """

    def __init__(self, name: str, expected: str, received: object, *, where: str | None = None):
        self.name = name
        self.expected = expected
        self.received = received
        prefix = f"{where}: " if where else ""
        super().__init__(
            f"{prefix}parameter {name!r} must be {expected}; received {_bounded_repr(received)}"
        )


def _bounded_repr(value: object) -> str:
    """``repr(value)`` cut to a few hundred characters, with bounded work (a YAML alias bomb
    is a list of billions of shared elements; its full repr once made a 580 MB error line)."""
    import reprlib

    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxtuple, short.maxdict, short.maxset = 4, 12, 12, 12, 12
    short.maxstring, short.maxother, short.maxlong = 200, 200, 60
    return short.repr(value)


class UnknownNameError(InvalidParameterError):
    """A registry lookup failed; the message lists the valid choices."""

    def __init__(self, kind: str, name: object, choices):
        self.choices = sorted(choices)
        super().__init__(kind, f"one of {self.choices}", name)


class DatasetNotFoundError(GnnPrivacyError, FileNotFoundError):
    """Raw files of a dataset are missing (or unreadable) and cannot be downloaded."""


class CorruptDatasetError(GnnPrivacyError, ValueError):
    """Raw files of a dataset exist but cannot be parsed."""


class PrivacyUnitMismatchError(GnnPrivacyError, ValueError):
    """An accountant was asked to compose events of different privacy units or relations."""


class BudgetExceededError(GnnPrivacyError, RuntimeError):
    """Composing one more event would exceed the privacy budget."""


class SmallSplitWarning(UserWarning):
    """The split leaves few training nodes (fewer than 500): private methods lose much
    accuracy there. ``gp.train`` warns with it; the record keeps the message."""


class WriteFailedError(GnnPrivacyError, OSError):
    """A file could not be written (disk full, read-only folder, no permission ...).

    The message is one line naming what was written, the file and the system's reason; the
    target file is unchanged (see `gnnprivacy._files.atomic_write`).
    """

    def __init__(self, what: str, path: object, cause: OSError):
        reason = cause.strerror or str(cause)
        super().__init__(cause.errno, reason, str(path))
        self.what = what
        self.path = str(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"could not write the {self.what} {self.path}: {self.reason}"


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM; raised in the main thread by the command line's handler so
    that the clean-up of Ctrl-C runs (workers stopped, nothing unfinished published)."""
