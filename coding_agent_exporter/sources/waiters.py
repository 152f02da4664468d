"""The operating system's own way to wait for a process to exit, one per system, for `procwatch`.

Each waiter watches some processes and blocks in `wait` until one of them exits, `wake` is
called from another thread, or a timeout passes:

- `PidfdWaiter` (Linux 5.3+, native probes only): a pidfd per process in a selector; a pidfd
  becomes readable when its process terminates. Woken through a pipe.
- `KqueueWaiter` (macOS, BSD): one kqueue, an `EVFILT_PROC`/`NOTE_EXIT` filter per pid; woken
  through a socket pair (a kqueue reads sockets and pipes alike; a socket pair is what every
  system has).
- `Win32Waiter` (Windows): a handle per process (`OpenProcess(SYNCHRONIZE)`, which becomes
  signalled when the process ends) and `WaitForMultipleObjects` on them and a wake event, from
  the watch's own thread, through ctypes. One call waits on at most 64 handles: 63 processes
  are waited on so, any beyond are left to the 1 s look of `procwatch` (`add` says False).

`add` returns True when the process is waited on, False when this waiter cannot wait on it
(not ours to open, or no room: `procwatch` then looks at its pid every second), and raises
`ProcessLookupError` when the process is already gone. The waiters are used from one thread;
only `wake` is called from others. The kqueue and Win32 waiters are tested here with fakes of
the kernel (`tests/test_procwatch.py`, labelled so): no Mac or Windows machine runs them here.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import socket
import threading
from typing import Any, Protocol

__all__ = ["KqueueWaiter", "PidfdWaiter", "PollWaiter", "Process", "Waiter", "Win32Waiter"]

Process = tuple[int, float | None]
"""A process as a live-index entry names it: pid and start time."""


class Waiter(Protocol):
    name: str

    def add(self, process: Process) -> bool: ...

    def remove(self, process: Process) -> None: ...

    def wait(self, timeout: float | None) -> set[Process]: ...

    def wake(self) -> None: ...

    def close(self) -> None: ...


class PollWaiter:
    """Waits on nothing but a wake-up: every process is left to `procwatch`'s look at its pid."""

    name = "poll"

    def __init__(self) -> None:
        self._woken = threading.Event()

    def add(self, process: Process) -> bool:
        return False

    def remove(self, process: Process) -> None:
        pass

    def wait(self, timeout: float | None) -> set[Process]:
        self._woken.wait(timeout)
        self._woken.clear()
        return set()

    def wake(self) -> None:
        self._woken.set()

    def close(self) -> None:
        pass


class PidfdWaiter:
    """Linux: pidfds in a selector, plus a pipe to wake it."""

    name = "pidfd"

    def __init__(self) -> None:
        if not hasattr(os, "pidfd_open"):
            raise OSError("no os.pidfd_open in this Python")
        self._fds: dict[Process, int] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)  # a full pipe already says "wake up"
        self._selector.register(self._wake_r, selectors.EVENT_READ)

    def add(self, process: Process) -> bool:
        try:
            fd = os.pidfd_open(process[0])
        except ProcessLookupError:
            raise
        except OSError:  # not ours to open
            return False
        self._fds[process] = fd
        self._selector.register(fd, selectors.EVENT_READ, process)
        return True

    def remove(self, process: Process) -> None:
        fd = self._fds.pop(process, None)
        if fd is not None:
            self._selector.unregister(fd)
            os.close(fd)

    def wait(self, timeout: float | None) -> set[Process]:
        ended: set[Process] = set()
        for key, _ in self._selector.select(timeout):
            if key.fd == self._wake_r:
                os.read(self._wake_r, 4096)
            else:
                ended.add(key.data)
                self.remove(key.data)
        return ended

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"x")

    def close(self) -> None:
        for process in list(self._fds):
            self.remove(process)
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)


class _SocketWake:
    """A wake-up any system can select on: one end of a socket pair (Windows selects only
    sockets; a pipe cannot be made non-blocking there)."""

    def __init__(self) -> None:
        self.reader, self._writer = socket.socketpair()
        self.reader.setblocking(False)
        self._writer.setblocking(False)

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):  # a full buffer already wakes
            self._writer.send(b"x")

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            self.reader.recv(4096)

    def close(self) -> None:
        self.reader.close()
        self._writer.close()


class KqueueWaiter:
    """macOS and the BSDs: `EVFILT_PROC` with `NOTE_EXIT` per pid in one kqueue. `kernel` is
    the `select` module, or a fake of it in a unit test."""

    name = "kqueue"

    def __init__(self, kernel: Any = select) -> None:
        self._k = kernel
        self._queue = kernel.kqueue()
        self._wake = _SocketWake()
        self._pids: dict[int, set[Process]] = {}  # a recycled pid may be named twice
        reader = kernel.kevent(self._wake.reader.fileno(), kernel.KQ_FILTER_READ, kernel.KQ_EV_ADD)
        self._queue.control([reader], 0, 0)

    def _event(self, pid: int, flags: int) -> Any:
        k = self._k
        return k.kevent(pid, k.KQ_FILTER_PROC, flags, k.KQ_NOTE_EXIT)

    def add(self, process: Process) -> bool:
        pid = process[0]
        if pid not in self._pids:
            try:
                self._queue.control([self._event(pid, self._k.KQ_EV_ADD)], 0, 0)
            except ProcessLookupError:
                raise
            except OSError:
                return False
        self._pids.setdefault(pid, set()).add(process)
        return True

    def remove(self, process: Process) -> None:
        named = self._pids.get(process[0])
        if named is None:
            return
        named.discard(process)
        if not named:
            del self._pids[process[0]]
            with contextlib.suppress(OSError):  # gone with its process already
                self._queue.control([self._event(process[0], self._k.KQ_EV_DELETE)], 0, 0)

    def wait(self, timeout: float | None) -> set[Process]:
        ended: set[Process] = set()
        for event in self._queue.control(None, 64, timeout):
            if event.filter == self._k.KQ_FILTER_PROC:
                ended |= self._pids.pop(event.ident, set())
            else:
                self._wake.drain()
        return ended

    def wake(self) -> None:
        self._wake.wake()

    def close(self) -> None:
        self._queue.close()
        self._wake.close()


SYNCHRONIZE = 0x00100000
MAXIMUM_WAIT_OBJECTS = 64
WAIT_OBJECT_0, WAIT_TIMEOUT, WAIT_FAILED, INFINITE = 0, 0x102, 0xFFFFFFFF, 0xFFFFFFFF
ERROR_INVALID_PARAMETER = 87
"""What `OpenProcess` says of a pid no process has."""


def _kernel32() -> Any:
    """Windows' kernel32 with the types of the calls used here (a handle is pointer-sized)."""
    import ctypes
    from ctypes import wintypes as w

    k = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    calls = {
        "CreateEventW": ([ctypes.c_void_p, w.BOOL, w.BOOL, w.LPCWSTR], w.HANDLE),
        "OpenProcess": ([w.DWORD, w.BOOL, w.DWORD], w.HANDLE),
        "WaitForMultipleObjects": ([w.DWORD, ctypes.POINTER(w.HANDLE), w.BOOL, w.DWORD], w.DWORD),
        "WaitForSingleObject": ([w.HANDLE, w.DWORD], w.DWORD),
        "SetEvent": ([w.HANDLE], w.BOOL),
        "CloseHandle": ([w.HANDLE], w.BOOL),
    }
    for name, (args, result) in calls.items():
        call = getattr(k, name)
        call.argtypes, call.restype = args, result
    return k


class Win32Waiter:
    """Windows: a process handle per process and an event to wake, waited on together by
    `WaitForMultipleObjects`. `kernel32` is ctypes' `kernel32` with `use_last_error`, or a fake
    in a unit test; `last_error` reads the error of the call before."""

    name = "win32"

    def __init__(self, kernel32: Any = None, last_error: Any = None) -> None:
        import ctypes

        self._k = kernel32 if kernel32 is not None else _kernel32()
        self._last_error = last_error or ctypes.get_last_error  # type: ignore[attr-defined]
        self._array = ctypes.c_void_p * MAXIMUM_WAIT_OBJECTS
        self._event = kernel32.CreateEventW(None, False, False, None)  # auto-reset
        if not self._event:
            raise OSError(self._last_error(), "CreateEventW failed")
        self._handles: dict[Process, int] = {}

    def add(self, process: Process) -> bool:
        if len(self._handles) >= MAXIMUM_WAIT_OBJECTS - 1:
            return False  # no room in one wait: looked at every second instead
        handle = self._k.OpenProcess(SYNCHRONIZE, False, process[0])
        if not handle:
            if self._last_error() == ERROR_INVALID_PARAMETER:
                raise ProcessLookupError(process[0])
            return False  # access denied: not ours to wait on
        self._handles[process] = handle
        return True

    def remove(self, process: Process) -> None:
        handle = self._handles.pop(process, None)
        if handle is not None:
            self._k.CloseHandle(handle)

    def wait(self, timeout: float | None) -> set[Process]:
        order = list(self._handles.items())
        handles = [self._event, *(h for _, h in order)]
        ms = INFINITE if timeout is None else max(0, int(timeout * 1000))
        result = self._k.WaitForMultipleObjects(len(handles), self._array(*handles), False, ms)
        if result == WAIT_FAILED:
            raise OSError(self._last_error(), "WaitForMultipleObjects failed")
        if result in (WAIT_TIMEOUT, WAIT_OBJECT_0):
            return set()
        # one signalled handle is named; others may have ended at the same time
        ended = {p for p, h in order if self._k.WaitForSingleObject(h, 0) == WAIT_OBJECT_0}
        for process in ended:
            self.remove(process)
        return ended

    def wake(self) -> None:
        self._k.SetEvent(self._event)

    def close(self) -> None:
        for process in list(self._handles):
            self.remove(process)
        self._k.CloseHandle(self._event)
