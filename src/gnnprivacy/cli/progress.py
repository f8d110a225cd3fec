"""Progress bars on stderr (stdout stays clean for ``--json``)."""

from __future__ import annotations

from contextlib import contextmanager


class _Task:
    def __init__(self, progress, task_id):
        self._progress, self._id = progress, task_id

    def update(self, n: int = 1, **fields) -> None:
        self._progress.update(self._id, advance=n, **fields)


@contextmanager
def progress_factory(enabled: bool = True):
    """Yield ``make(description, total) -> task`` (``task.update(n)``), or ``None`` when disabled."""
    if not enabled:
        yield None
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
