"""Progress on stderr (stdout stays clean for ``--json``).

On a terminal: rich progress bars. Elsewhere (a log file, CI, ``nohup``, a pipe): plain log lines,
one when a task starts, then at most one every ``interval`` seconds while it advances, plus a
heartbeat line when nothing advanced for ``interval`` seconds (so a long first run is not
silence), and one when it finishes:

```
[progress] sweep demo: run 3/8 (38%), elapsed 0:00:12, ETA 0:00:20
```

The interval is 30 s by default (``$GNNPRIVACY_PROGRESS_INTERVAL`` changes it). Quiet mode
(`quiet_mode`, the CLI's ``-q``) disables both, silences Python warnings and PyG's
"Processing... / Done!" messages (also in sweep workers, through ``$GNNPRIVACY_QUIET``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager

INTERVAL_ENV = "GNNPRIVACY_PROGRESS_INTERVAL"
QUIET_ENV = "GNNPRIVACY_QUIET"


class _Task:
    def __init__(self, progress, task_id):
        self._progress, self._id = progress, task_id

    def update(self, n: int = 1, **fields) -> None:
        self._progress.update(self._id, advance=n, **fields)

    def close(self) -> None:
        """The work ended before ``total`` (early stopping): the bar ends where it stands."""
        task = next(t for t in self._progress.tasks if t.id == self._id)
        self._progress.update(self._id, total=task.completed)


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class PlainTask:
    """A progress task that writes plain lines (see the module docstring)."""

    def __init__(self, description: str, total: int | None, *, stream=None, interval: float = 30.0,
                 unit: str = "step", clock=time.monotonic):
        self.description, self.total, self.unit = description, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.interval, self._clock = float(interval), clock
        self.done = 0
        self.start = clock()
        self._last_line = self.start
        self._lock = threading.Lock()
        self._finished = False
        self._emit()

    def line(self) -> str:
        elapsed = self._clock() - self.start
        if self.total:
            pct = f" ({100 * self.done / self.total:.0f}%)"
            count = f"{self.unit} {self.done}/{self.total}{pct}"
        else:
            count = f"{self.unit} {self.done}"
        text = f"[progress] {self.description}: {count}, elapsed {_clock(elapsed)}"
        if self.total and 0 < self.done < self.total:
            text += f", ETA {_clock(elapsed / self.done * (self.total - self.done))}"
        return text

    def _emit(self, text: str | None = None) -> None:
        self._last_line = self._clock()
        print(self.line() if text is None else text, file=self.stream, flush=True)

    def update(self, n: int = 1, **fields) -> None:
        with self._lock:
            self.done += n
            complete = self.total is not None and self.done >= self.total
            if complete and not self._finished:
                self._finished = True
                self._emit()
            elif not complete and self._clock() - self._last_line >= self.interval:
                self._emit()

    def close(self) -> None:
        """The work ended before ``total`` (e.g. early stopping): one last line saying so, and
        no heartbeat after it (a heartbeat would report a stale ETA until the process ends)."""
        with self._lock:
            if not self._finished:
                self._finished = True
                total = f"/{self.total}" if self.total else ""
                self._emit(f"[progress] {self.description}: stopped at {self.unit} {self.done}"
                           f"{total}, elapsed {_clock(self._clock() - self.start)}")

    def heartbeat(self) -> None:
        """Write a line if none was written for ``interval`` seconds (called by a timer thread)."""
        with self._lock:
            if not self._finished and self._clock() - self._last_line >= self.interval:
                self._emit()


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get(INTERVAL_ENV, "30")))
    except ValueError:
        return 30.0


@contextmanager
def plain_progress(stream=None, interval: float | None = None):
    """Yield ``make(description, total) -> PlainTask``; a daemon thread writes heartbeats."""
    interval = _interval() if interval is None else interval
    tasks: list[PlainTask] = []
    stop = threading.Event()

    def beat():
        while not stop.wait(min(max(interval, 0.05), 5.0)):
            for t in list(tasks):
                t.heartbeat()

    thread = threading.Thread(target=beat, name="gnnprivacy-progress", daemon=True)
    thread.start()

    def make(description: str, total: int, unit: str | None = None) -> PlainTask:
        if unit is None:
            unit = "run" if description.startswith(("sweep", "reproduce")) else "step"
        task = PlainTask(description, total, stream=stream, interval=interval, unit=unit)
        tasks.append(task)
        return task

    try:
        yield make
    finally:
        stop.set()
        thread.join(1.0)


@contextmanager
def progress_factory(enabled: bool = True, *, stream=None):
    """Yield ``make(description, total) -> task`` (``task.update(n)``), or ``None`` when disabled.

    Rich bars when stderr is a terminal, plain periodic log lines otherwise.
    """
    if not enabled:
        yield None
        return
    stream = stream if stream is not None else sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        with plain_progress(stream) as make:
            yield make
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        def make(description: str, total: int) -> _Task:
            return _Task(progress, progress.add_task(description, total=total))

        yield make


@contextmanager
def quiet_mode(enabled: bool = True):
    """Silence warnings and third-party chatter (PyG's "Processing..."), here and in workers."""
    if not enabled:
        yield
        return
    import warnings

    old = os.environ.get(QUIET_ENV)
    os.environ[QUIET_ENV] = "1"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if old is None:
            os.environ.pop(QUIET_ENV, None)
        else:
            os.environ[QUIET_ENV] = old
