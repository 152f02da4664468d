"""Run the exporter in a stand-in for macOS or Windows, on this Linux machine.

    python tests/standin.py darwin|windows|linux -- <exporter argv>
    python tests/standin.py darwin|windows|linux --many ARGV.json OUT.json

Before the exporter is imported, this process is made to look like the other system, as far as
the exporter and the libraries it imports after that can tell:

- both: `sys.platform` is `darwin` or `win32`; `os.pidfd_open` is gone; `/proc` cannot be read,
  listed, stat-ed or linked through, except by psutil (which is imported first, as the real
  Linux psutil: on macOS and Windows psutil has its own way to ask the kernel); `select.epoll`
  and `select.poll` are gone (neither system has them, so selectors fall back as they would).
- macOS: libc has no `inotify_*` symbols (`ctypes.CDLL` lookups of them fail), so watchdog's
  inotify module raises `UnsupportedLibcError` as it does there.
- Windows: the `os` functions CPython lacks there are gone (`pread`, `pwrite`, `O_CLOEXEC`,
  `O_NONBLOCK`, `major`, `minor`, `makedev`, `getloadavg`, `set_blocking`, `get_blocking`,
  `fork`, `forkpty`, `register_at_fork`, `sched_getaffinity`, `uname`); `fcntl`, `pwd`, `grp`,
  `resource`, `termios`, `pty` and `tty` cannot be imported; `ctypes.CDLL(None)` raises
  `TypeError`; `select.select` accepts sockets only (Windows selects nothing else).
- `linux`: nothing is changed (the same launcher, for a run to compare with).

What a stand-in cannot be: the other system's kernel. There is no FSEvents, no kqueue
(`select.kqueue` does not exist here, so the exporter's kqueue wait falls back to its look at
the pids) and no Win32 API (`ctypes.windll` does not exist, so the process-handle wait falls
back the same way); watchdog finds no FSEvents or ReadDirectoryChangesW and polls; paths are
still POSIX paths (`os.sep` is `/`, no drive letters, no backslashes); psutil is Linux's. The
kqueue and Win32 waits are tested against fakes in `tests/test_waiters.py`.

`--many` runs the exporter once per argv of a JSON list, in this one process, and writes a JSON
list of `{"code", "stdout"}` (one start for many fixtures). Reads of `/proc` that were refused
are written to stderr at exit as `standin: refused ...` lines, naming the module that tried.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SYSTEMS = {"darwin": "darwin", "windows": "win32", "linux": None}
WINDOWS_LACKS = (
    "pread", "pwrite", "O_CLOEXEC", "O_NONBLOCK", "major", "minor", "makedev", "getloadavg",
    "set_blocking", "get_blocking", "fork", "forkpty", "register_at_fork", "sched_getaffinity",
    "uname",
)  # fmt: skip
WINDOWS_NO_MODULES = ("fcntl", "pwd", "grp", "resource", "termios", "pty", "tty")
PREIMPORT = (
    # imported as Linux's: they choose their implementation by sys.platform when imported
    "psutil", "psutil._pslinux", "psutil._psposix", "subprocess", "multiprocessing",
    "multiprocessing.context", "multiprocessing.connection", "multiprocessing.popen_spawn_posix",
    "concurrent.futures.process", "selectors", "socket", "socketserver", "http.server",
    "ctypes", "ctypes.util", "uuid", "tempfile", "shutil", "mimetypes", "asyncio", "ssl",
    "sqlite3", "zstandard", "platform", "getpass", "logging.handlers", "urllib.request",
    "email.utils", "http.client", "webbrowser", "locale", "zipfile", "gzip",
)  # fmt: skip
refused: list[str] = []


def _psutil_asks() -> bool:
    """Whether psutil (anywhere up the stack) is the one reading."""
    frame = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            return False
        if str(frame.f_globals.get("__name__", "")).startswith("psutil"):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _is_proc(path: Any) -> bool:
    if isinstance(path, int):
        return False
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError:
        return False
    return text == "/proc" or text.startswith("/proc/")


def _guarded(call: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
        if _is_proc(path) and not _psutil_asks():
            caller = sys._getframe(1)
            refused.append(f"{caller.f_globals.get('__name__')}:{caller.f_lineno} {path}")
            raise FileNotFoundError(2, "No such file or directory (stand-in: no /proc)", path)
        return call(path, *args, **kwargs)

    guarded.__wrapped__ = call  # type: ignore[attr-defined]
    return guarded


def _close_proc() -> None:
    builtins.open = _guarded(builtins.open)
    io.open = builtins.open
    for name in ("open", "listdir", "scandir", "readlink", "stat", "lstat", "access"):
        setattr(os, name, _guarded(getattr(os, name)))
    atexit.register(_report)


def _report() -> None:
    for line in dict.fromkeys(refused):
        sys.stderr.write(f"standin: refused {line}\n")


def _no_inotify_in_libc() -> None:
    import ctypes

    class CDLL(ctypes.CDLL):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("inotify_"):
                raise AttributeError(f"stand-in libc has no {name}")
            return super().__getattr__(name)

        def __getitem__(self, name: Any) -> Any:
            if isinstance(name, str) and name.startswith("inotify_"):
                raise AttributeError(f"stand-in libc has no {name}")
            return super().__getitem__(name)

    ctypes.CDLL = CDLL  # type: ignore[misc]


def _no_dlopen_of_nothing() -> None:
    """Windows: `ctypes.CDLL(None)` (the process's own symbols) raises TypeError there."""
    import ctypes

    class CDLL(ctypes.CDLL):
        def __init__(self, name: Any, *args: Any, **kwargs: Any) -> None:
            if name is None:
                raise TypeError("stand-in Windows: CDLL needs a library name")
            super().__init__(name, *args, **kwargs)

    ctypes.CDLL = CDLL  # type: ignore[misc]


def _sockets_only() -> None:
    import select
    import selectors
    import stat

    real = select.select

    def select_(r: Any, w: Any, x: Any, timeout: float | None = None) -> Any:
        for fd in {*r, *w, *x}:
            number = fd if isinstance(fd, int) else fd.fileno()
            if not stat.S_ISSOCK(os.fstat(number).st_mode):
                raise OSError(10038, "stand-in Windows: select() takes sockets only")
        return real(r, w, x, timeout)

    select.select = select_
    selectors.DefaultSelector = selectors.SelectSelector  # type: ignore[misc]


def install(system: str) -> None:
    """Make this process look like `system` (see the module's docstring)."""
    platform_name = SYSTEMS[system]
    if platform_name is None:
        return
    for name in PREIMPORT:
        with contextlib.suppress(ImportError):
            __import__(name)
    import select
    import selectors

    for name in ("epoll", "poll", "devpoll"):
        if hasattr(select, name):
            delattr(select, name)
    if selectors.DefaultSelector in (selectors.EpollSelector, selectors.PollSelector):
        selectors.DefaultSelector = selectors.SelectSelector  # type: ignore[misc]
    if hasattr(os, "pidfd_open"):
        del os.pidfd_open
    if system == "darwin":
        _no_inotify_in_libc()
    else:
        for name in WINDOWS_LACKS:
            if hasattr(os, name):
                delattr(os, name)
        for name in WINDOWS_NO_MODULES:
            sys.modules[name] = None  # type: ignore[assignment]
        _no_dlopen_of_nothing()
        _sockets_only()
    _close_proc()
    sys.platform = platform_name


def _many(argv_file: str, out_file: str) -> int:
    from coding_agent_exporter.runtime.cli import main

    results = []
    for argv in json.loads(Path(argv_file).read_text()):
        stdout, sys.stdout = sys.stdout, io.StringIO()
        try:
            code = main(argv)
        finally:
            text, sys.stdout = sys.stdout.getvalue(), stdout
        results.append({"code": code, "stdout": text})
    Path(out_file).write_text(json.dumps(results))
    return 0


def run(args: list[str]) -> int:
    system, rest = args[0], args[1:]
    if system not in SYSTEMS:
        raise SystemExit(f"usage: standin.py {'|'.join(SYSTEMS)} -- <exporter argv>")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    install(system)
    if rest[:1] == ["--many"]:
        return _many(rest[1], rest[2])
    from coding_agent_exporter.runtime.cli import main

    return main(rest[1:] if rest[:1] == ["--"] else rest)


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
