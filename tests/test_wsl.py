"""WSL's Windows drives (`/mnt/<drive>`): which agent folders sit on one (detection against FAKE
mount tables taken from WSL 1 and WSL 2, labelled as such), and the interval rescan that stands
in for the file events Windows' writes never give there, run for real: a real `serve` whose
folder is declared on a Windows drive and whose file events are dropped, as 9P drops them."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coding_agent_exporter.sources import mounts, platform

from .backends import free_port, get, wait_for
from .conftest import ROOT
from .test_inotify_limit import session, total

# FAKE tables, as /proc/mounts lists them under WSL 2 (9p, aname=drvfs) and WSL 1 (drvfs)
WSL2 = r"""none /mnt/wsl tmpfs rw,relatime 0 0
/dev/sdc / ext4 rw,relatime,discard,errors=remount-ro,data=ordered 0 0
C:\134 /mnt/c 9p rw,noatime,dirsync,aname=drvfs;path=C:\;uid=1000;gid=1000,trans=virtio 0 0
D:\134 /mnt/my\040drive 9p rw,noatime,aname=drvfs;path=D:\ 0 0
/dev/sdd /mnt/c/linux-disk ext4 rw,relatime 0 0
"""
WSL1 = r"""rootfs / lxfs rw,noatime 0 0
C:\134 /mnt/c drvfs rw,noatime,uid=1000,gid=1000,case=off 0 0
"""


def test_fake_tables_are_parsed_with_escapes() -> None:
    table = mounts.parse(WSL2)
    assert ("/mnt/c", "9p") in table and ("/mnt/my drive", "9p") in table
    assert mounts.parse(WSL1)[1] == ("/mnt/c", "drvfs")


@pytest.mark.parametrize("table", [WSL2, WSL1], ids=["wsl2-9p", "wsl1-drvfs"])
def test_fake_table_tells_windows_drive_folders(table: str) -> None:
    roots = ["/mnt/c/Users/u/.claude/projects", "/home/u/.claude/projects", "/mnt/wsl/x"]
    assert mounts.on_windows_drive(roots, mounts.parse(table)) == [roots[0]]


def test_fake_table_deepest_mount_wins() -> None:
    """A Linux disk mounted inside a Windows drive is not a Windows drive; a root not made yet
    is judged by the mount it will be on."""
    table = mounts.parse(WSL2)
    assert mounts.on_windows_drive(["/mnt/c/linux-disk/.codex"], table) == []
    assert mounts.on_windows_drive(["/mnt/my drive/.codex/not-yet"], table) == [
        "/mnt/my drive/.codex/not-yet"
    ]


def test_only_wsl_reads_its_mounts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not WSL (this machine): nothing is rescanned and /proc/mounts is not read. WSL (a FAKE
    platform and table): the Windows-drive roots are."""
    roots = [Path("/mnt/c/Users/u/.claude/projects"), Path("/home/u/.claude/sessions")]
    monkeypatch.setattr(platform, "_chosen", platform.Platform("linux", native=True, wsl=False))
    monkeypatch.setattr(mounts, "mounts", lambda: pytest.fail("read /proc/mounts off WSL"))
    assert mounts.rescanned(roots) == []
    monkeypatch.setattr(platform, "_chosen", platform.Platform("linux", native=True, wsl=True))
    monkeypatch.setattr(mounts, "mounts", lambda: tuple(mounts.parse(WSL2)))
    assert mounts.rescanned(roots) == [roots[0]]


def test_unstable_devices_are_those_of_windows_drives(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(mounts, "mounts", lambda: ((str(tmp_path), "9p"), ("/", "ext4")))
    assert mounts.unstable_devices.__wrapped__() == frozenset({tmp_path.stat().st_dev})


# A real `serve`, told its Claude Code `projects` folder is on a Windows drive, with every file
# event dropped (as 9P drops Windows' writes): only the rescan can find what is written.
_SERVE = """
import sys
from coding_agent_exporter.runtime import cli
from coding_agent_exporter.sources import mounts, watch

projects = sys.argv[1]
mounts.rescanned = lambda roots: [r for r in roots if str(r) == projects]
watch.Watcher._record = lambda self, event: None  # no file events at all
sys.exit(cli.main(sys.argv[2:]))
"""


def test_a_windows_drive_folder_is_rescanned_for_real(tmp_path: Path, probes: str) -> None:
    home = tmp_path / "claude"
    (home / "projects" / "p").mkdir(parents=True)
    port = free_port()
    argv = ["serve", "--claude.home", str(home), "--codex.home", str(tmp_path / "no-codex")]
    argv += ["--web.listen-address", f"127.0.0.1:{port}", "--platform.wsl-rescan-interval"]
    argv += ["0.2s", "--log.level", "info"]
    for name in ("gemini-cli", "opencode", "pi", "oh-my-pi", "grok", "vibe"):
        argv.append(f"--no-harness.{name}")
    log_path = tmp_path / "exporter.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(home / "projects"), *argv],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for("ready", lambda: get(url + "/-/ready")[0] == 200, deadline=30)
            page = get(url + "/metrics")[1]
            assert 'coding_agent_exporter_rescanned_roots{agent="claude-code"} 1.0' in page
            assert 'coding_agent_exporter_rescanned_roots{agent="codex"} 0.0' in page
            sid, text = session(1)
            (home / "projects" / "p" / f"{sid}.jsonl").write_bytes(text)
            written = time.monotonic()
            wait_for(
                "the session written after start",
                lambda: total(get(url + "/metrics")[1], "coding_agent_sessions_total") == 1,
                deadline=20,
            )
            print(f"\nfound by the rescan after {time.monotonic() - written:.2f} s")
            (home / "projects" / "p" / f"{sid}.jsonl").unlink()
            shutil.rmtree(home / "projects" / "p")
            wait_for(
                "the gone file let go",
                lambda: total(get(url + "/metrics")[1], "coding_agent_exporter_files_watched") == 0,
                deadline=20,
            )
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=15)
    text = log_path.read_text()
    assert code == 0, text
    assert f"{home / 'projects'} is on a Windows drive: rescanning it every 0.2 s" in text
    assert text.count("is on a Windows drive") == 1  # only the folder declared so
