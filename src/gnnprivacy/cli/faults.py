"""How the command line answers faults of the machine rather than of the input.

`fault_guard` wraps every subcommand:

- a write that fails because the disk is full, the folder is read-only or not permitted
  (`WriteFailedError`, or an ``OSError`` with such an errno) ends the
  command with one line, ``Error: could not write the run record runs/x.json: No space left on
  device``, and exit status 1 instead of a traceback. A run that finished but could not be
  published (`RunNotPublishedError`) also prints its record
  as JSON on stdout, so the result is not lost, and names the kept checkpoint to ``--resume`` from;
- SIGTERM is turned into `Terminated` (a ``KeyboardInterrupt``), so the
  clean-up of Ctrl-C runs (sweep workers are stopped at once, nothing unfinished is published) and
  the command exits with status 143; Ctrl-C exits with status 130 and the same one line;
- warnings raised by gnnprivacy print as ``warning: <message>`` lines on stderr.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import warnings

import click

from gnnprivacy.errors import Terminated


def _on_sigterm(signum, frame):  # noqa: ARG001 - signal handler signature
    raise Terminated()


def _format_warning(message, category, filename, lineno, line=None):  # noqa: ARG001
    if getattr(category, "__module__", "").startswith("gnnprivacy"):
        return f"warning: {message}\n"
    return _ORIGINAL_FORMAT(message, category, filename, lineno, line)


_ORIGINAL_FORMAT = warnings.formatwarning


@contextlib.contextmanager
def fault_guard():
    """The context every subcommand runs in (see the module docstring)."""
    from gnnprivacy._files import is_write_fault
    from gnnprivacy._torch_state import torch_state_kept

    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (embedded use): leave SIGTERM alone
        pass
    warnings.formatwarning = _format_warning
    try:
        with torch_state_kept():   # a command invoked in-process leaves torch as it found it
            yield
    except KeyboardInterrupt as exc:
        name, code = ("SIGTERM", 128 + signal.SIGTERM) if isinstance(exc, Terminated) else ("Ctrl-C", 130)
        click.echo(f"Stopped by {name}: finished runs are kept, nothing unfinished was published "
                   "(run the same command again to continue).", err=True)
        sys.exit(code)
    except OSError as exc:
        if not is_write_fault(exc):
            raise
        record = getattr(exc, "record", None)
        if record is not None:
            from gnnprivacy.records.record import dumps

            click.echo(dumps(record.to_dict(), indent=2))
            click.echo("(the finished run's record is printed above on stdout)", err=True)
        message = str(exc) if hasattr(exc, "what") else f"{exc.strerror or exc}: {exc.filename}"
        raise click.ClickException(message) from None
    finally:
        warnings.formatwarning = _ORIGINAL_FORMAT
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
