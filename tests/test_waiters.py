"""The macOS (kqueue) and Windows (process handle) waiters of `sources.waiters`, driven by FAKES
of the kernel: no Mac or Windows machine exists here.

What these prove: the waiters make the calls the system documents (`EVFILT_PROC` with
`NOTE_EXIT` per pid, `EV_DELETE` when a pid is no longer watched; `OpenProcess(SYNCHRONIZE)`,
`WaitForMultipleObjects` over a wake event and the process handles, every handle closed) and
turn their answers into exits `ProcessWatch` reports once, a process gone before it is watched,
and one the system will not let us wait on (looked at every second instead). What they cannot
prove: that a real kernel answers as the fakes do (the fakes follow the documentation of
kqueue(2) and of the Win32 calls, not a recording). Linux's pidfd and the portable look at pids
run for real against real processes in `tests/test_procwatch.py`."""

from __future__ import annotations

import errno
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from coding_agent_exporter.sources.procwatch import ProcessWatch
from coding_agent_exporter.sources.waiters import (
    ERROR_INVALID_PARAMETER,
    MAXIMUM_WAIT_OBJECTS,
    SYNCHRONIZE,
    WAIT_OBJECT_0,
    WAIT_TIMEOUT,
    KqueueWaiter,
    Win32Waiter,
)

DEADLINE = 5.0


def until(what: str, check: Callable[[], object]) -> None:
    end = time.monotonic() + DEADLINE
    pause = threading.Event()
    while not check():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        pause.wait(0.01)


class Exits:
    def __init__(self) -> None:
        self.reports: list[set[int]] = []

    def __call__(self, pids: set[int]) -> None:
        self.reports.append(pids)


# -- a fake of macOS's kqueue (select.kqueue and its constants) -----------------------------------


@dataclass
class KEvent:
    ident: int
    filter: int
    flags: int = 0
    fflags: int = 0


class FakeKqueueKernel:
    """FAKE `select` module: `kqueue()`, `kevent(...)` and the constants kqueue(2) names. A
    registered socket is really selected on (the waiter's wake-up); a process exit is what the
    test says (`exit(pid)`). `gone` pids make `EV_ADD` fail with ESRCH, as for a pid with no
    process."""

    KQ_FILTER_READ, KQ_FILTER_PROC = -1, -5
    KQ_EV_ADD, KQ_EV_DELETE = 0x1, 0x2
    KQ_NOTE_EXIT = 0x80000000

    def __init__(self) -> None:
        self.gone: set[int] = set()
        self.procs: set[int] = set()  # pids with a NOTE_EXIT filter
        self.changes: list[KEvent] = []
        self.reads: set[int] = set()
        self._exits: list[int] = []
        self._note_r, self._note_w = socket.socketpair()
        self.closed = False

    def kevent(self, ident: int, filter: int, flags: int, fflags: int = 0) -> KEvent:
        return KEvent(ident, filter, flags, fflags)

    def kqueue(self) -> FakeKqueueKernel:
        return self

    def exit(self, pid: int) -> None:
        self._exits.append(pid)
        self._note_w.send(b"x")

    def control(self, changes: list[KEvent] | None, most: int, timeout: float | None) -> Any:
        for change in changes or []:
            self.changes.append(change)
            if change.filter == self.KQ_FILTER_READ:
                self.reads.add(change.ident)
            elif change.flags & self.KQ_EV_DELETE:
                self.procs.discard(change.ident)
            elif change.ident in self.gone:
                raise ProcessLookupError(errno.ESRCH, "No such process")
            else:
                assert change.fflags == self.KQ_NOTE_EXIT
                self.procs.add(change.ident)
        if not most:
            return []
        ready, _, _ = select.select([*self.reads, self._note_r], [], [], timeout)
        events = [KEvent(fd, self.KQ_FILTER_READ) for fd in ready if fd in self.reads]
        if self._note_r in ready:
            self._note_r.recv(4096)
            exits, self._exits = self._exits, []
            events += [KEvent(p, self.KQ_FILTER_PROC, 0, self.KQ_NOTE_EXIT) for p in exits]
        return events

    def close(self) -> None:
        self.closed = True
        self._note_r.close()
        self._note_w.close()


def test_fake_kqueue_an_exit_is_reported_once() -> None:
    kernel = FakeKqueueKernel()
    exits = Exits()
    watch = ProcessWatch(exits, waiter=KqueueWaiter(kernel), poll=0.05)
    watch.start()
    try:
        watch.watch([(101, 1.0), (102, 2.0)])
        until("both pids watched", lambda: kernel.procs == {101, 102})
        kernel.exit(101)
        until("the exit reported", lambda: exits.reports == [{101}])
        watch.watch([(101, 1.0), (102, 2.0)])  # still named by a stale entry: not again
        watch.watch([(102, 2.0)])
        kernel.exit(102)
        until("the second exit reported", lambda: exits.reports == [{101}, {102}])
    finally:
        watch.stop()
    assert kernel.closed


def test_fake_kqueue_a_pid_gone_before_it_is_watched_is_reported() -> None:
    kernel = FakeKqueueKernel()
    kernel.gone.add(7)
    exits = Exits()
    watch = ProcessWatch(exits, waiter=KqueueWaiter(kernel))
    watch.start()
    try:
        watch.watch([(7, None)])
        until("the exit reported", lambda: exits.reports == [{7}])
    finally:
        watch.stop()


def test_fake_kqueue_a_pid_no_longer_named_is_deleted_from_the_queue() -> None:
    kernel = FakeKqueueKernel()
    waiter = KqueueWaiter(kernel)
    assert waiter.add((5, 1.0)) and waiter.add((5, 9.0))  # a recycled pid, named twice
    waiter.remove((5, 1.0))
    assert kernel.procs == {5}  # still named once
    waiter.remove((5, 9.0))
    assert kernel.procs == set()
    deletes = [c for c in kernel.changes if c.flags & kernel.KQ_EV_DELETE]
    assert [(c.ident, c.filter) for c in deletes] == [(5, kernel.KQ_FILTER_PROC)]
    waiter.close()


# -- a fake of Windows' kernel32 -------------------------------------------------------------------


class FakeKernel32:
    """FAKE kernel32: events and process handles as integers, `WaitForMultipleObjects` waiting
    on a condition until one of the given handles is signalled (the first one's index wins, as
    documented; an auto-reset event is reset by the wait that returns it). `OpenProcess` of a pid
    in `gone` fails with ERROR_INVALID_PARAMETER, of one in `denied` with access denied."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 100
        self.open: dict[int, int | None] = {}  # handle → its pid (None: an event)
        self.signalled: set[int] = set()
        self.gone: set[int] = set()
        self.denied: set[int] = set()
        self.error = 0
        self.waited_on: list[int] = []  # handle counts of each wait

    def last_error(self) -> int:
        return self.error

    def _handle(self, pid: int | None) -> int:
        self._next += 4
        self.open[self._next] = pid
        return self._next

    def CreateEventW(self, attributes: Any, manual: bool, initial: bool, name: Any) -> int:
        assert not manual and not initial
        with self._cond:
            return self._handle(None)

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int:
        assert access == SYNCHRONIZE and not inherit
        with self._cond:
            if pid in self.gone or pid in self.denied:
                self.error = ERROR_INVALID_PARAMETER if pid in self.gone else 5
                return 0
            return self._handle(pid)

    def exit(self, pid: int) -> None:
        with self._cond:
            self.signalled |= {h for h, p in self.open.items() if p == pid}
            self._cond.notify_all()

    def SetEvent(self, handle: int) -> int:
        with self._cond:
            self.signalled.add(handle)
            self._cond.notify_all()
        return 1

    def WaitForMultipleObjects(self, count: int, handles: Any, all_: bool, ms: int) -> int:
        assert not all_ and count <= MAXIMUM_WAIT_OBJECTS
        wanted = [int(handles[i]) for i in range(count)]
        assert all(h in self.open for h in wanted), "a closed handle waited on"
        self.waited_on.append(count)
        with self._cond:
            ready = self._cond.wait_for(
                lambda: any(h in self.signalled for h in wanted),
                None if ms == 0xFFFFFFFF else ms / 1000,
            )
            if not ready:
                return WAIT_TIMEOUT
            index = next(i for i, h in enumerate(wanted) if h in self.signalled)
            if self.open[wanted[index]] is None:
                self.signalled.discard(wanted[index])  # auto-reset
            return WAIT_OBJECT_0 + index

    def WaitForSingleObject(self, handle: int, ms: int) -> int:
        with self._cond:
            return WAIT_OBJECT_0 if handle in self.signalled else WAIT_TIMEOUT

    def CloseHandle(self, handle: int) -> int:
        with self._cond:
            del self.open[handle]
            self.signalled.discard(handle)
        return 1


def win32(kernel: FakeKernel32) -> Win32Waiter:
    return Win32Waiter(kernel, kernel.last_error)


def test_fake_win32_an_exit_is_reported_once_and_every_handle_closed() -> None:
    kernel = FakeKernel32()
    exits = Exits()
    watch = ProcessWatch(exits, waiter=win32(kernel), poll=0.05)
    watch.start()
    try:
        watch.watch([(201, 1.0), (202, 2.0)])
        until(
            "both handles open", lambda: sorted(p for p in kernel.open.values() if p) == [201, 202]
        )
        kernel.exit(202)
        until("the exit reported", lambda: exits.reports == [{202}])
        until("its handle closed", lambda: 202 not in kernel.open.values())
        kernel.exit(201)
        until("the second exit reported", lambda: exits.reports == [{202}, {201}])
    finally:
        watch.stop()
    assert kernel.open == {}  # the event and every process handle closed


def test_fake_win32_a_pid_gone_is_reported_and_a_denied_one_is_looked_at() -> None:
    kernel = FakeKernel32()
    kernel.gone.add(301)
    kernel.denied.add(302)
    waiter = win32(kernel)
    with pytest.raises(ProcessLookupError):
        waiter.add((301, None))
    assert waiter.add((302, None)) is False  # ProcessWatch looks at its pid every second
    waiter.close()
    assert kernel.open == {}


def test_fake_win32_one_wait_holds_63_processes_the_rest_are_looked_at() -> None:
    kernel = FakeKernel32()
    waiter = win32(kernel)
    held = [waiter.add((pid, None)) for pid in range(1000, 1000 + MAXIMUM_WAIT_OBJECTS)]
    assert held == [True] * (MAXIMUM_WAIT_OBJECTS - 1) + [False]
    assert waiter.wait(0) == set()
    assert kernel.waited_on == [MAXIMUM_WAIT_OBJECTS]  # the wake event and 63 processes
    kernel.exit(1005)
    kernel.exit(1007)  # two at once: both found, though one wait names one
    assert waiter.wait(1.0) == {(1005, None), (1007, None)}
    waiter.close()
    assert kernel.open == {}


def test_fake_win32_a_wake_returns_without_an_exit() -> None:
    kernel = FakeKernel32()
    waiter = win32(kernel)
    waiter.add((5, None))
    waiter.wake()
    assert waiter.wait(None) == set()  # the event, reset by the wait
    assert waiter.wait(0) == set()
    waiter.close()


def test_fake_win32_a_failing_wait_falls_back_to_looking_at_the_pids() -> None:
    """WaitForMultipleObjects fails (WAIT_FAILED): the watch closes the waiter's handles and
    looks at the pids instead; the pid here has no process, so it is reported as ended."""
    kernel = FakeKernel32()
    kernel.WaitForMultipleObjects = lambda *args: 0xFFFFFFFF  # type: ignore[method-assign]
    exits = Exits()
    watch = ProcessWatch(exits, waiter=win32(kernel), poll=0.05)
    watch.start()
    try:
        watch.watch([(2**22 + 1, None)])  # above Linux's default pid_max: no such process
        until("the exit reported", lambda: exits.reports == [{2**22 + 1}])
        assert watch.waiter.name == "poll" and kernel.open == {}
    finally:
        watch.stop()
