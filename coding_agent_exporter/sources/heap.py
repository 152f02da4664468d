"""The C heap told to give large blocks back (glibc): a catch-up's peak is not kept as free room.

glibc serves a block of 128 KiB or more from its own `mmap`, given back when freed, but raises
that threshold to the size of each such block freed (up to 32 MiB): after the first 8 MiB piece
a catch-up reads, the pieces, the compressors' buffers and the arrays that grow come from the
heap, whose free room stays with the process (at 100,000 tiny journals, ~24 MB at the end of the
reading; peak RSS 164 -> 152 MB with the threshold fixed, the same CPU). Fixing the threshold
(`mallopt(M_MMAP_THRESHOLD)`, which also stops its adjustment) keeps large blocks out of it. Only
the program itself asks (`cli.main`), and only where the C library is glibc's.
"""

from __future__ import annotations

import os
import sys

M_MMAP_THRESHOLD = -3
"""glibc's `mallopt` parameter (malloc.h)."""
THRESHOLD = 128 * 1024
"""glibc's own default, kept fixed."""


def give_back_large_blocks() -> bool:
    """Fix glibc's mmap threshold; False where there is no glibc (or it refused)."""
    if sys.platform != "linux" or not _glibc():
        return False
    import ctypes  # only here: 2 ms of imports on the program's start

    try:
        return bool(ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, THRESHOLD))
    except (OSError, AttributeError):
        return False


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):
        return False
