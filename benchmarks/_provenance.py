"""Where a benchmark result comes from: the source tree's commit state, and shell output."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sh(*cmd: str) -> str:
    """A command's stdout, stripped; "" where the command does not exist."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except OSError:
        return ""


def git_state() -> str:
    """The last commit that changed src/, and a hash of src/'s uncommitted changes if any."""
    head = sh("git", "log", "-1", "--format=%h", "--", "src")
    diff = sh("git", "diff", "HEAD", "--", "src") + sh("git", "status", "--porcelain", "--", "src")
    return f"{head}-dirty-{hashlib.sha1(diff.encode()).hexdigest()[:8]}" if diff else head
