"""A large reload hands the memory of its transient row objects back to the system."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent(
    """
    from pathlib import Path

    import numpy as np

    from ctxbase.retrieve.synced import return_freed_memory

    def rss_mb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    # what a reload reads: one small array per row; a few stay alive among them
    rows = [np.ones(384, dtype=np.float32) for _ in range(200_000)]
    kept = rows[::100]
    del rows
    before = rss_mb()
    assert return_freed_memory()
    print(before - rss_mb(), len(kept))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_row_memory_goes_back_to_the_system() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True
    ).stdout.split()
    returned_mb = float(out[0])
    assert returned_mb > 100  # of ~300 MB of rows freed, most pages held nothing alive
