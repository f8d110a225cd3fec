"""Executors: run a picklable function over many items in parallel, one interface, two backends.

- `LocalExecutor` (``local``, the default): a ``concurrent.futures`` process pool on this
  machine, ``workers`` processes (default ``os.cpu_count()``), forked from a ``forkserver`` that
  has imported torch and PyG once (``spawn`` where there is no fork server), each limited to
  ``threads_per_worker = max(1, cpu_count // workers)`` torch/OpenMP threads, so the pool never
  oversubscribes the cores; where the parent sets ``OMP_NUM_THREADS``, workers keep that value.
  At most ``workers`` items are handed to the pool at a time, so every item given to it is running.
- `RayExecutor` (``ray``): Ray tasks. It connects to ``address`` (an existing cluster;
  one CPU and one torch thread per task, at most ``workers`` tasks in flight if given) or starts
  a local Ray instance with ``ray.init(num_cpus=workers * threads_per_worker,
  include_dashboard=False)`` (each task reserving ``threads_per_worker`` CPUs and using that many
  torch threads, as the local pool does), and shuts its connection down afterwards (a cluster it
  connected to keeps running).

Ctrl-C (local executor): workers ignore SIGINT, so only the parent decides. The first Ctrl-C
stops scheduling new runs (none is queued: only running items were handed to the pool) and waits
for the running ones to finish and publish their records; a second Ctrl-C terminates the workers
at once (SIGTERM, then SIGKILL after 2 s), so nothing is left running after the command exits.
SIGTERM to the parent (turned into `Terminated` by the command line)
terminates the workers at once in the same way: no worker outlives the command, and the runs they
had not finished are not published (their claims and checkpoints are taken up by the rerun).

Both yield ``(item, result)`` pairs as items finish (in completion order). A failure of the
execution machinery itself (a worker killed, a broken pool, a Ray node lost) is yielded as
``(item, exception)`` so the caller can record it; exceptions raised by ``fn`` itself propagate
the same way. Modules listed in ``imports`` are imported in every worker before it runs anything
(e.g. a module that registers extra training methods).
"""

from __future__ import annotations

import importlib
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from gnnprivacy.errors import InvalidParameterError

EXECUTORS = ("local", "ray")
_END = object()


def default_threads(workers: int) -> int:
    """Torch threads per worker: ``$OMP_NUM_THREADS`` where the parent sets it (a positive
    integer), else as many as let ``workers`` processes fill, not oversubscribe, the CPUs."""
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def prepare_worker(threads: int, imports: tuple[str, ...] = (), sys_path: tuple[str, ...] = ()) -> None:
    """Per-worker set-up: cap OpenMP/MKL/torch threads, add the parent's ``sys.path`` entries,
    then import the requested modules."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    sys.path.extend(p for p in sys_path if p not in sys.path)
    import torch

    torch.set_num_threads(threads)
    for name in imports:
        importlib.import_module(name)


def _prepare_local_worker(threads: int, imports: tuple[str, ...] = (), sys_path: tuple[str, ...] = ()) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (module docstring)
    prepare_worker(threads, imports, sys_path)


def _stop_fork_server() -> None:
    """Kill the fork server now: it holds no work, and its orderly exit (tearing down torch)
    takes seconds, which a user who pressed Ctrl-C twice should not wait for."""
    try:
        import signal
        from multiprocessing import forkserver

        pid = forkserver._forkserver._forkserver_pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        forkserver._forkserver._stop()  # closes its pipe, reaps it
    except Exception:  # noqa: BLE001 - private API; the server then exits on its own a bit later
        pass


class Executor(ABC):
    """Common interface: a context manager with `imap_unordered`."""

    name: str = ""

    def __init__(self, *, workers: int | None = None, imports: Iterable[str] = ()):
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise InvalidParameterError("workers", "an integer >= 1", workers)
        self.workers = workers or (os.cpu_count() or 1)
        self.threads_per_worker = default_threads(self.workers)
        self.imports = tuple(imports)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(workers={self.workers}, threads_per_worker={self.threads_per_worker})"

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        from gnnprivacy.errors import Terminated

        if exc_type is not None and issubclass(exc_type, Terminated):
            self.terminate()
        elif exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.interrupt()
        else:
            self.shutdown()

    def terminate(self) -> None:
        """SIGTERM: stop the running items now (default: `shutdown`)."""
        self.shutdown()

    def interrupt(self) -> None:
        """First Ctrl-C: drop queued items and let running ones finish (default: `shutdown`)."""
        self.shutdown()

    def start(self) -> None:
        """Acquire resources (processes, a Ray connection)."""

    def shutdown(self) -> None:
        """Release what `start` acquired."""

    @abstractmethod
    def imap_unordered(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        """Apply ``fn`` to every item; yield ``(item, result_or_exception)`` as they finish."""


class LocalExecutor(Executor):
    """A process pool on this machine (see the module docstring)."""

    name = "local"

    def __init__(self, *, workers: int | None = None, imports: Iterable[str] = ()):
        super().__init__(workers=workers, imports=imports)
        self._pool = None
        self._in_flight: dict = {}  #: futures handed to the pool and not yet yielded -> item

    def start(self) -> None:
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=_process_context(),
            initializer=_prepare_local_worker, initargs=(self.threads_per_worker, self.imports, tuple(sys.path)))

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def interrupt(self) -> None:
        if self._pool is None:
            return
        running = sum(1 for f in self._in_flight if not f.done())
        print(f"Interrupted: starting no new run; waiting for the {running} running run(s) to finish; "
              "press Ctrl-C again to stop them now.", file=sys.stderr, flush=True)
        try:
            self._pool.shutdown(wait=True, cancel_futures=True)
        except KeyboardInterrupt:
            self.terminate()
            raise
        self._pool = None

    def terminate(self, grace_seconds: float = 2.0) -> None:
        """Stop every worker now (SIGTERM, SIGKILL after ``grace_seconds``) and drop the pool."""
        import time

        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = [p for p in (pool._processes or {}).values()]
        for p in procs:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + grace_seconds
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1.0)
        pool.shutdown(wait=True, cancel_futures=True)  # workers are gone: returns at once
        _stop_fork_server()

    def imap_unordered(self, fn, items):
        from concurrent.futures import FIRST_COMPLETED, wait

        if self._pool is None:
            raise RuntimeError("LocalExecutor used outside its `with` block")
        queue = iter(items)
        pending = self._in_flight

        def fill():  # hand the pool only as many items as it has workers: none waits in its queue
            while len(pending) < self.workers:
                item = next(queue, _END)
                if item is _END:
                    return
                pending[self._pool.submit(fn, item)] = item

        fill()
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            finished = [(future, pending.pop(future)) for future in done]
            fill()
            for future, item in finished:
                try:
                    yield item, future.result()
                except Exception as exc:  # noqa: BLE001 - reported per item by the caller
                    yield item, exc


# Imported once by the fork server, so that workers start without re-importing torch and PyG.
_PRELOAD = ["torch", "torch_geometric", "gnnprivacy.experiments.sweep", "gnnprivacy.method.runner",
            "gnnprivacy.datasets"]


def _process_context():
    """``forkserver`` where available (workers fork from a clean, single-threaded server that has
    already imported torch and PyG: fast start, no forked thread state), else ``spawn``.

    On a machine with a CUDA device, ``spawn``: importing torch and PyG in the fork server
    initialises the CUDA driver there, and every worker forked from it then failed its run with
    "CUDA error: initialization error", CPU runs too (seen on an H200 machine with torch 2.11)."""
    import multiprocessing

    import torch

    if torch.cuda.is_available():
        return multiprocessing.get_context("spawn")
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def _ray_call(threads: int, imports: tuple[str, ...], sys_path: tuple[str, ...], fn, item):
    prepare_worker(threads, imports, sys_path)
    return fn(item)


class RayExecutor(Executor):
    """Ray tasks on a cluster (``address``) or on a local instance started here."""

    name = "ray"

    def __init__(self, *, workers: int | None = None, address: str | None = None, imports: Iterable[str] = ()):
        super().__init__(workers=workers, imports=imports)
        self.address = address
        # On a cluster this machine's CPU count means nothing: one CPU (thread) per task, and
        # at most `workers` tasks in flight only when asked; Ray's scheduler does the rest.
        self.max_in_flight = workers if (workers or not address) else None
        if address:
            self.threads_per_worker = 1
        self._owns_connection = False
        self._remote = None

    def start(self) -> None:
        ray = _import_ray()
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
            if self.address:
                ray.init(address=self.address, **kwargs)
            else:
                ray.init(num_cpus=self.workers * self.threads_per_worker, **kwargs)
            self._owns_connection = True
        self._remote = ray.remote(num_cpus=self.threads_per_worker, max_retries=0)(_ray_call)

    def shutdown(self) -> None:
        if self._owns_connection:
            _import_ray().shutdown()
            self._owns_connection = False

    def imap_unordered(self, fn, items):
        ray = _import_ray()
        if self._remote is None:
            raise RuntimeError("RayExecutor used outside its `with` block")
        fn_ref = ray.put(fn)
        path = tuple(p for p in sys.path if p)
        queue, pending = list(items), {}
        while queue or pending:
            while queue and (self.max_in_flight is None or len(pending) < self.max_in_flight):
                item = queue.pop(0)
                pending[self._remote.remote(self.threads_per_worker, self.imports, path, fn_ref, item)] = item
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                item = pending.pop(ref)
                try:
                    yield item, ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - RayTaskError, WorkerCrashedError ...
                    yield item, exc


def _import_ray():
    try:
        import ray
    except ImportError:
        raise InvalidParameterError(
            "executor", "'local', or 'ray' with Ray installed (pip install 'gnnprivacy[ray]')",
            "ray (not installed)") from None
    return ray


def make_executor(name: str, *, workers: int | None = None, address: str | None = None,
                  imports: Iterable[str] = ()) -> Executor:
    """Build an executor by name (``local`` or ``ray``); ``address`` only applies to Ray."""
    from gnnprivacy._validation import check_choice

    check_choice("executor", name, EXECUTORS)
    if address and name != "ray":
        raise InvalidParameterError("address", "used only with --executor ray", address)
    if name == "ray":
        _import_ray()
        return RayExecutor(workers=workers, address=address, imports=imports)
    return LocalExecutor(workers=workers, imports=imports)
