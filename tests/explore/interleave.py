"""Concurrency in the explorer, one step at a time.

Every invocation, concurrent twin and timed-out run of a schedule is a process on a thread
of its own, but only the one holding the baton runs, and it gives the baton away only at
an AWS call (or when it waits for, or ends, a process). Which process runs at each call is
decided by the schedule alone, so a schedule replays exactly, however the machine's
threads are scheduled, while the handlers run unchanged (blocking calls, their own
`time.sleep`, their own exceptions).

- `call`: run a child (a synchronous invoke, an invocation by the source) and wait for
  its outcome: its result, its error, or DETACHED when it timed out first.
- `spawn`: a concurrent process (a twin delivery), run at once beside the caller.
- `switch`: the running process steps back; the next ready one runs.
- `time_out`: an invocation runs out of time: whoever waits for it resumes (with
  DETACHED) while it, paused, finishes the call it had in flight later, in the
  background, and dies (its own children, other invocations, go on).
- `background`: an invocation nobody waits for (its caller's read timed out), run when
  nothing else can, or at a `switch`; `companion`: a thread of an invocation's, the same;
  `join`: wait for one to end.

- `sleep`: the running process waits until a time; the others run meanwhile, and the
  clock moves on to the earliest waking sleeper only when none can (a discrete-event
  clock: whoever sleeps shortest wakes first).

Ready processes run front first; background ones (an unwaited or timed-out invocation)
when no ready one can; then the earliest sleeper; `run` returns once every process,
background ones included, has ended.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import enum
import threading
from collections.abc import Callable, Iterator
from typing import Any


class SandboxDied(BaseException):  # (what happened, not an error to handle)
    """The execution environment was killed right after an AWS call took effect."""


class State(enum.Enum):
    READY = "ready"
    RUNNING = "running"
    WAITING = "waiting"  # for a child
    SLEEPING = "sleeping"  # until `wake`
    DONE = "done"


DETACHED = "detached"


@dataclasses.dataclass(eq=False)
class Process:
    name: str
    fn: Callable[[], Any]
    invocation: bool = False  # a Lambda invocation: it can time out or die
    parent: Process | None = None
    state: State = State.READY
    background: bool = False
    dead: bool = False  # its sandbox died: it may make no further call
    dying: bool = False  # out of time: its call in flight lands, then it is dead
    deadline: float | None = None  # (a clock time) an invocation is killed at its timeout
    label: str = ""  # what it is doing (a durable step's name): its calls carry it
    wake: float = 0.0  # (sleeping) when it wakes
    turn: threading.Condition | None = None  # notified when the baton comes to it
    outcome: tuple[str, Any] = ("", None)  # ("ok", value) | ("error", exception)
    waited_by: Process | None = None
    joined_by: list[Process] = dataclasses.field(default_factory=list)  # (`join`)
    child_outcome: tuple[str, Any] = ("", None)  # what its last `call` came back with
    thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<{self.name} {self.state.value}{' bg' if self.background else ''}>"


class Deadlock(AssertionError):
    pass


class Interleaver:
    def __init__(self, clock: Any = None) -> None:
        self.clock = clock  # (.now) the schedule's: sleepers wake by it
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)  # the run's: a process ended, or none runs
        self._ready: list[Process] = []
        self._background: list[Process] = []
        self._sleepers: list[Process] = []
        self._all: list[Process] = []
        self.current: Process | None = None
        self._local = threading.local()
        self.switches = 0

    # -- the processes' side ---------------------------------------------------------------
    def me(self) -> Process | None:
        """The process of the calling thread (None outside any)."""
        return getattr(self._local, "process", None)

    def invocation(self) -> Process | None:
        """The innermost Lambda invocation the calling thread runs in."""
        return self.invocation_of(self.me())

    def run(self, fn: Callable[[], Any], name: str = "main") -> Any:
        """From outside any process: `fn` as the first process; every process, background
        ones included, ended before it returns (its result, or its error raised)."""
        root = self._new(name, fn, None, invocation=False)
        with self._cv:
            self._ready.insert(0, root)
            self._dispatch()
            while any(p.state is not State.DONE for p in self._all):
                self._cv.wait(timeout=60)
                waiting = [p for p in self._all if p.state is not State.DONE]
                if self.current is None and waiting:
                    raise Deadlock(f"no process can run: {self._all}")
                # (the baton held by a process whose thread is gone: nothing would ever
                # wake this one; a hang of the explorer's own, said rather than waited out)
                holder = self.current
                thread = holder.thread if holder is not None else None
                if thread is not None and not thread.is_alive() and waiting:
                    raise Deadlock(f"{holder} holds the baton, its thread gone: {waiting}")
        for process in self._all:
            if process.thread is not None:
                process.thread.join()
        kind, value = root.outcome
        if kind == "error":
            raise value
        return value

    def call(
        self,
        name: str,
        fn: Callable[[], Any],
        invocation: bool = True,
        deadline: float | None = None,
    ) -> tuple[str, Any]:
        """Run `fn` as a child of this process and wait: ("ok", result), ("error", exc), or
        (DETACHED, None) when it timed out and goes on in the background."""
        me = self._require()
        child = self._new(name, fn, me, invocation)
        child.deadline = deadline
        with self._cv:
            child.waited_by = me
            me.state = State.WAITING
            self._ready.insert(0, child)
            self._hand_over(me)
        return me.child_outcome

    def spawn(self, name: str, fn: Callable[[], Any], invocation: bool = False) -> Process:
        """A concurrent process, run now; this one goes on when it ends, waits or steps back.
        It is no part of this one (not inside its invocation: a twin has its own)."""
        me = self._require()
        child = self._new(name, fn, None, invocation)
        with self._cv:
            me.state = State.READY
            self._ready[:0] = [child, me]
            self._hand_over(me)
        return child

    def switch(self) -> bool:
        """Step back for the next ready (else background) process, if any; whether one ran."""
        me = self._require()
        with self._cv:
            others = [p for p in self._ready if p is not me] or [
                p for p in self._background if p is not me
            ]
            if not others:
                return False
            self.switches += 1
            me.state = State.READY
            (self._background if me.background else self._ready).append(me)
            nxt = others[0]
            for queue in (self._ready, self._background):
                if nxt in queue:
                    queue.remove(nxt)
            self._ready.insert(0, nxt)
            self._hand_over(me)
        return True

    def sleep(self, seconds: float) -> None:
        """This process waits `seconds` by the clock; the others run meanwhile. (Outside
        any process: the clock just moves on.)"""
        me = self.me()
        if me is None or self.clock is None:
            if self.clock is not None:
                self.clock.now += max(0.0, seconds)
            return
        with self._cv:
            me.wake = self.clock.now + max(0.0, seconds)
            me.state = State.SLEEPING
            self._sleepers.append(me)
            self._hand_over(me)

    def background(
        self, name: str, fn: Callable[[], Any], deadline: float | None = None
    ) -> Process:
        """An invocation nobody waits for, run in the background (later, or at a switch)."""
        me = self._require()
        process = self._new(name, fn, me, invocation=True)
        process.deadline = deadline
        process.background = True
        with self._cv:
            self._background.append(process)
        return process

    def companion(self, name: str, fn: Callable[[], Any]) -> Process:
        """A thread of this process's invocation, nobody waiting for it (run in the
        background, later or at a switch): its calls are the invocation's, and it dies
        with it (a dead sandbox makes no call)."""
        me = self._require()
        process = self._new(name, fn, me, invocation=False)
        process.background = True
        with self._cv:
            self._background.append(process)
        return process

    def join(self, process: Process) -> None:
        """Wait until `process` (a companion of this one's, say) has ended; the others run
        meanwhile."""
        me = self._require()
        with self._cv:
            if process.state is State.DONE:
                return
            me.state = State.WAITING
            process.joined_by.append(me)
            self._hand_over(me)

    def interrupt(self, invocation: Process) -> None:
        """`invocation`'s sandbox died: every thread of it waiting for another (`join`)
        resumes at once, to die (Lambda stops an environment's threads together)."""
        with self._cv:
            for process in self._all:
                for joiner in list(process.joined_by):
                    if self.invocation_of(joiner) is invocation:
                        process.joined_by.remove(joiner)
                        joiner.state = State.READY
                        (self._background if joiner.background else self._ready).append(joiner)

    def time_out(self, target: Process) -> bool:
        """`target` (an invocation someone waits for: the running process, or one waiting
        for a child of its own) runs out of time: its waiter resumes with DETACHED, now;
        it lands the call it has in flight later, in the background, and dies. False if
        no one waits for it."""
        me = self._require()
        waiter = target.waited_by
        if not target.invocation or waiter is None or target.state is State.DONE:
            return False
        with self._cv:
            target.waited_by = None
            target.background = True
            target.dying = True
            waiter.child_outcome = (DETACHED, None)
            waiter.state = State.READY
            self._ready.insert(0, waiter)
            me.state = State.READY
            if me is target:
                self._background.append(me)
            else:  # the target waits for a child (this one): that child goes on, after
                self._ready.insert(1, me)
            self._hand_over(me)
        return True

    # -- the machinery ---------------------------------------------------------------------
    @staticmethod
    def invocation_of(process: Process | None) -> Process | None:
        """The innermost Lambda invocation `process` runs in (itself, or a caller of it)."""
        while process is not None and not process.invocation:
            process = process.parent
        return process

    def _require(self) -> Process:
        me = self.me()
        if me is None:
            raise AssertionError("not inside an explorer process")
        return me

    def _new(
        self, name: str, fn: Callable[[], Any], parent: Process | None, invocation: bool
    ) -> Process:
        process = Process(name, fn, invocation, parent)
        process.turn = threading.Condition(self._lock)  # woken alone, when its turn comes
        process.thread = threading.Thread(
            target=self._body, args=(process,), name=f"explore:{name}", daemon=True
        )
        self._all.append(process)
        process.thread.start()
        return process

    def _body(self, process: Process) -> None:
        self._local.process = process
        assert process.turn is not None
        with self._cv:
            while self.current is not process:
                process.turn.wait()
        try:
            process.outcome = ("ok", process.fn())
        except BaseException as exc:  # (a process's outcome, whatever it is)
            process.outcome = ("error", exc)
        with self._cv:
            process.state = State.DONE
            joiners, process.joined_by = process.joined_by, []
            for joiner in joiners:
                joiner.state = State.READY
                (self._background if joiner.background else self._ready).insert(0, joiner)
            # (nobody waits for an ended process any more: a later `time_out` of it, an
            # orphan's caller that ended first, say, must not wake its one-time waiter)
            waiter, process.waited_by = process.waited_by, None
            if waiter is not None:
                waiter.child_outcome = process.outcome
                waiter.state = State.READY
                if waiter.background:
                    self._background.insert(0, waiter)
                else:
                    self._ready.insert(0, waiter)
            self._dispatch()

    def _hand_over(self, me: Process) -> None:
        """(Holding the lock) give the baton to the next process, and wait for it back."""
        self._dispatch()
        assert me.turn is not None
        while self.current is not me:
            me.turn.wait()
        me.state = State.RUNNING

    def _dispatch(self) -> None:
        """(Holding the lock) the next process to run: the front of the ready ones, else the
        oldest background one, else the earliest sleeper (the clock moves on to its waking);
        None when every process waits or has ended."""
        nxt = None
        if self._ready:
            nxt = self._ready.pop(0)
        elif self._background:
            nxt = self._background.pop(0)
        elif self._sleepers:
            nxt = min(self._sleepers, key=lambda p: p.wake)  # (the first to sleep, on a tie)
            self._sleepers.remove(nxt)
            if self.clock is not None:
                self.clock.now = max(self.clock.now, nxt.wake)
        self.current = nxt
        if nxt is not None:
            nxt.state = State.RUNNING
            assert nxt.turn is not None
            nxt.turn.notify()
        self._cv.notify()


class InlinePool:
    """A thread pool that runs each task at once on the caller's thread: a handler's
    concurrent calls stay in its explorer process, in one order (every task still runs,
    and `map` raises at the first failed one when read, as a pool's does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> InlinePool:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def submit(self, fn: Any, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def map(self, fn: Any, *iterables: Any) -> Iterator[Any]:
        futures = [self.submit(fn, *args) for args in zip(*iterables, strict=False)]
        return (future.result() for future in futures)

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Joined(concurrent.futures.Future[Any]):
    """A BesidePool task's future: waited for as the explorer process it runs in."""

    def __init__(self, processes: Interleaver) -> None:
        super().__init__()
        self.processes = processes
        self.process: Any = None

    def wait(self) -> None:
        """Until the task ends, or its invocation dies (its threads with it)."""
        while not self.done():
            invocation = self.processes.invocation()
            if invocation is not None and invocation.dead:
                raise SandboxDied("its invocation died while it waited for a thread")
            self.processes.join(self.process)

    def result(self, timeout: float | None = None) -> Any:
        self.wait()
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self.wait()
        return super().exception(0)


class BesidePool(InlinePool):
    """A thread pool whose tasks run beside the caller, each a thread of its invocation
    (`Interleaver.companion`), interleaved with it and each other call by call and by the
    clock: what a handler's thread does while another waits (for a slow target, or the
    next second) is seen as AWS would run it. A scenario chooses the pools, by their
    threads' names (`beside`). Unlike a ThreadPoolExecutor: each task has a thread of its
    own (`max_workers` is not a bound), `result` takes no timeout, and a future is waited
    for only by its own `result`, `exception` or the pool's exit (`concurrent.futures.wait`
    would hold the turn and hang the schedule)."""

    def __init__(self, processes: Interleaver, name: str) -> None:
        self.processes = processes
        self.name = name
        self.tasks: list[_Joined] = []

    def submit(self, fn: Any, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future = _Joined(self.processes)

        def task() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # (a dead sandbox's too: whoever waits sees it)
                future.set_exception(exc)

        me = self.processes.me()
        name = f"{me.name if me else ''}:{self.name}{len(self.tasks) + 1}"
        future.process = self.processes.companion(name, task)
        self.tasks.append(future)
        return future

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        for task in self.tasks:
            task.wait()


@contextlib.contextmanager
def beside(processes: Interleaver, *names: str) -> Iterator[None]:
    """While it lasts, a thread pool whose threads are named one of `names` runs its tasks
    beside the caller (BesidePool); every other pool, inline."""
    inline = concurrent.futures.ThreadPoolExecutor

    def pool(*args: Any, thread_name_prefix: str = "", **kwargs: Any) -> Any:
        if len(args) > 1:
            thread_name_prefix = args[1]
        if thread_name_prefix in names:
            return BesidePool(processes, thread_name_prefix)
        return InlinePool()

    concurrent.futures.ThreadPoolExecutor = pool  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        concurrent.futures.ThreadPoolExecutor = inline  # type: ignore[misc]
