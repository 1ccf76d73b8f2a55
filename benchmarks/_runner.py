"""Scheduling the runs of a sweep: resume from the store, progress and ETA, time budget, jobs.

:func:`execute` trains the runs the store lacks (a corrupt record, or one trained by another
version of sklearn_calib, is discarded and trained again), one after another in this
process or in ``jobs`` worker processes (spawned, each training one run at a time and
writing its record itself). Before a run starts, its duration is estimated from the runs
already timed in this sweep (seconds per epoch of the same kind of run), else from a
measured step of its kind (:mod:`benchmarks._costs`); with ``max_minutes`` a run that
would end past the budget is not started, so a long sweep splits into calls that resume
where the last one stopped.
"""

import concurrent.futures
import multiprocessing
import queue as queue_module
import sys
import time
from dataclasses import dataclass, field

import torch

from ._costs import (
    FIGURES_PER_EXPERIMENT,
    cost_group,
    measure,
    parallel_jobs,
    time_figure,
    time_worker_start,
)
from ._report import format_duration
from ._store import RunStore
from ._train import train_run

#: Seconds between progress lines of the running epoch when the output is not a terminal.
PROGRESS_INTERVAL = 20.0

#: Prior cost of a meta-learned epoch relative to a plain one, when none is measured.
META_FACTOR = 3.0


@dataclass
class Task:
    """A run to train: key, specification and a label for progress lines."""

    key: str
    spec: dict = field(repr=False)
    label: str


@dataclass
class Summary:
    """What :func:`execute` did: keys trained, redone (were corrupt or outdated) and left
    untrained."""

    trained: list = field(default_factory=list)
    redone: list = field(default_factory=list)
    outdated: list = field(default_factory=list)
    remaining: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def complete(self):
        return not self.remaining


class Estimator:
    """Expected wall time of a run, from measured steps and the runs timed so far.

    Runs are grouped by :func:`~benchmarks._costs.cost_group`; a group's runs take their
    measured mean seconds per epoch once one has been trained in this sweep, else the
    cost of a measured step of the group (:meth:`measure`), else the prior ``epochs *
    prior_epoch + prior_overhead`` (meta-learned runs :data:`META_FACTOR` times that).

    Parameters
    ----------
    prior_epoch : float
        Seconds per epoch assumed for a group neither measured nor timed.
    prior_overhead : float, default=0.0
        Seconds per run on top of its epochs (setup, evaluation, writing the record).
    """

    def __init__(self, prior_epoch, prior_overhead=0.0):
        self.prior_epoch = prior_epoch
        self.prior_overhead = prior_overhead
        self.timed = {}
        self.steps = {}
        self.figure_seconds = None  # (matplotlib's import, one figure)
        self.worker_start = None

    def measure(self, tasks, *, device="auto", data_home=None, jobs=1):
        """Time a short training of every kind of run among ``tasks`` (with the threads a
        run will use: one per run when ``jobs`` > 1), one report figure and, when
        ``jobs`` > 1, the start of a worker process.

        Returns
        -------
        failures : list of str
            Groups that could not be measured (the prior stands for them), with the reason.
        """
        threads = torch.get_num_threads()
        if jobs > 1:
            torch.set_num_threads(1)
        failures = []
        try:
            for task in tasks:
                group = cost_group(task.spec)
                if group in self.steps or group in self.timed:
                    continue
                try:
                    self.steps[group] = measure(task.spec, device=device, data_home=data_home)
                except (OSError, RuntimeError, ValueError) as exc:
                    failures.append(f"{task.label}: {exc}")
                    self.steps[group] = None
            if tasks and self.figure_seconds is None:
                self.figure_seconds = time_figure()
            if tasks and jobs > 1 and self.worker_start is None:
                self.worker_start = time_worker_start(tasks[0].spec, data_home)
        finally:
            torch.set_num_threads(threads)
        return failures

    def add(self, spec, seconds, epochs):
        self.timed.setdefault(cost_group(spec), []).append(seconds / max(epochs, 1))

    def run_seconds(self, spec):
        epochs = spec["training"]["epochs"]
        group = cost_group(spec)
        if group in self.timed:
            return epochs * sum(self.timed[group]) / len(self.timed[group])
        if self.steps.get(group) is not None:
            return self.steps[group].run_seconds(spec)
        seconds = epochs * self.prior_epoch + self.prior_overhead
        return seconds * (META_FACTOR if spec["estimator"]["name"] == "meta" else 1.0)

    def total(self, tasks, jobs=1):
        """Expected wall seconds of ``tasks`` trained ``jobs`` at a time.

        Worker processes (``jobs`` > 1) each pay the measured start of a spawned process
        and the warm-up of its first run; a single job trains in this process, warmed up
        by the measurement.
        """
        jobs = parallel_jobs(jobs)
        seconds = sum(self.run_seconds(t.spec) for t in tasks)
        if jobs > 1 and tasks:
            steps = [step for step in self.steps.values() if step is not None]
            warmup = max((step.warmup for step in steps), default=0.0)
            seconds += jobs * (warmup + (self.worker_start or 0.0))
        return seconds / jobs

    def analysis_seconds(self, runs_by_name):
        """Expected seconds of the reports: a post-hoc evaluation of every run (experiments
        that share a run share its evaluation) and the experiments' figures."""
        runs = {run.key: run for listed in runs_by_name.values() for run in listed}
        steps = [self.steps.get(cost_group(run.spec)) for run in runs.values()]
        evaluations = sum(step.evaluation for step in steps if step is not None)
        if self.figure_seconds is None:
            return evaluations
        imported, figure = self.figure_seconds
        return evaluations + imported + FIGURES_PER_EXPERIMENT * len(runs_by_name) * figure


class Progress:
    """Progress lines: runs done / to do, the running epoch, the time left."""

    def __init__(self, total, estimator, jobs, stream=None):
        self.total = total
        self.done = 0
        self.estimator = estimator
        self.jobs = jobs
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.last_print = 0.0
        self.remaining = []

    def _write(self, text, transient=False):
        if self.tty:
            end = "" if transient else "\n"
            self.stream.write("\r\033[K" + text + end)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def eta(self):
        return format_duration(self.estimator.total(self.remaining, self.jobs))

    def epoch(self, task, epoch, n_epochs, seconds):
        now = time.monotonic()
        if not self.tty and now - self.last_print < PROGRESS_INTERVAL:
            return
        self.last_print = now
        self._write(
            f"  [{self.done + 1}/{self.total}] {task.label}: epoch {epoch}/{n_epochs} "
            f"({seconds:.2f} s); sweep ETA {self.eta()}",
            transient=True,
        )

    def finished(self, task, meta):
        self.done += 1
        epochs = meta["epochs"]
        self._write(
            f"[{self.done}/{self.total}] trained {task.label} [{task.key}] in "
            f"{meta['wall_seconds']:.1f} s ({epochs} epochs, "
            f"{meta['fit_seconds'] / epochs:.2f} s/epoch on {meta['device']}); "
            f"{self.total - self.done} to go, ETA {self.eta()}"
        )
        self.last_print = time.monotonic()


def _train_and_store(task, store, device, data_home, report):
    arrays, history, meta = train_run(task.spec, device=device, data_home=data_home, report=report)
    store.save(task.key, task.spec, arrays, history, meta)
    return meta


_WORKER_QUEUE = None


def _init_worker(progress_queue, threads):
    global _WORKER_QUEUE
    _WORKER_QUEUE = progress_queue
    torch.set_num_threads(threads)


def _worker(task, root, device, data_home):
    def report(epoch, n_epochs, seconds):
        _WORKER_QUEUE.put((task.key, epoch, n_epochs, seconds))

    return _train_and_store(task, RunStore(root), device, data_home, report)


def execute(
    tasks,
    store,
    *,
    device="auto",
    data_home=None,
    max_minutes=None,
    jobs=1,
    estimator=None,
    stream=None,
):
    """Train the tasks the store lacks, within the time budget.

    Parameters
    ----------
    tasks : list of Task
        Unique keys, in priority order.
    store : RunStore
    device : str, default="auto"
    data_home : str or None, default=None
    max_minutes : float or None, default=None
        No run is started that is expected to end later than this many minutes after
        the call began.
    jobs : int, default=1
        Runs trained at the same time (worker processes when > 1).
    estimator : Estimator or None, default=None
        Run-time estimates (a prior of 1 s per epoch when None).
    stream : file or None, default=None
        Where progress goes (stdout).

    Returns
    -------
    summary : Summary
    """
    start = time.monotonic()
    stream = stream or sys.stdout
    summary = Summary()
    todo = []
    for task in tasks:
        status = store.status(task.key, task.spec)
        if status == "valid":
            continue
        if status in ("corrupt", "outdated"):
            store.discard(task.key)
            summary.redone.append(task.key)
            if status == "outdated":
                summary.outdated.append(task.key)
        todo.append(task)
    estimator = estimator or Estimator(1.0)
    progress = Progress(len(todo), estimator, jobs, stream)
    progress.remaining = list(todo)
    deadline = None if max_minutes is None else start + 60.0 * max_minutes
    if todo:
        stream.write(
            f"{len(tasks)} runs needed: {len(tasks) - len(todo)} stored, {len(todo)} to train"
            + _redone_text(summary)
            + f"; estimated {progress.eta()}\n"
        )
        stream.flush()

    def fits(task, now):
        return deadline is None or now + estimator.run_seconds(task.spec) <= deadline

    def done(task, meta):
        estimator.add(task.spec, meta["wall_seconds"], meta["epochs"])
        progress.remaining.remove(task)
        summary.trained.append(task.key)
        progress.finished(task, meta)

    if jobs <= 1:
        for task in todo:
            if not fits(task, time.monotonic()):
                break

            def report(epoch, n_epochs, seconds, task=task):
                progress.epoch(task, epoch, n_epochs, seconds)

            done(task, _train_and_store(task, store, device, data_home, report))
    else:
        _execute_parallel(todo, store, device, data_home, jobs, fits, done, progress)
    summary.remaining = [task.key for task in progress.remaining]
    summary.seconds = time.monotonic() - start
    return summary


def _redone_text(summary):
    corrupt = len(summary.redone) - len(summary.outdated)
    parts = [f"{corrupt} corrupt records"] if corrupt else []
    if summary.outdated:
        parts.append(f"{len(summary.outdated)} records of another sklearn_calib version")
    return f" ({' and '.join(parts)} redone)" if parts else ""


def _execute_parallel(todo, store, device, data_home, jobs, fits, done, progress):
    context = multiprocessing.get_context("spawn")
    by_key = {task.key: task for task in todo}
    threads = 1  # N runs on N cores: one thread each is fastest for the presets' networks
    with context.Manager() as manager:
        progress_queue = manager.Queue()
        with concurrent.futures.ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_init_worker, initargs=(progress_queue, threads)
        ) as pool:
            waiting, running = list(todo), {}
            stopped = False
            while running or (waiting and not stopped):
                while waiting and not stopped and len(running) < jobs:
                    if not fits(waiting[0], time.monotonic()):
                        stopped = True
                        break
                    task = waiting.pop(0)
                    future = pool.submit(_worker, task, str(store.root), device, data_home)
                    running[future] = task
                if not running:
                    break
                finished, _ = concurrent.futures.wait(
                    running, timeout=0.5, return_when=concurrent.futures.FIRST_COMPLETED
                )
                _drain(progress_queue, by_key, progress)
                for future in finished:
                    task = running.pop(future)
                    done(task, future.result())


def _drain(progress_queue, by_key, progress):
    while True:
        try:
            key, epoch, n_epochs, seconds = progress_queue.get_nowait()
        except queue_module.Empty:
            return
        progress.epoch(by_key[key], epoch, n_epochs, seconds)
