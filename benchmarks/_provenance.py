"""Where a benchmark result comes from: the source tree's commit state, and shell output."""

from __future__ import annotations

import datetime
import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def started(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The environment a result is saved with, as the run starts: date, command line, the
    machine's fingerprint, torch, the source's commit state, and the machine's load."""
    import torch

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["python", *sys.argv]),
        "fingerprint": fingerprint,
        "torch": torch.__version__,
        "torchpace_git": git_state(),
        "uptime_before": sh("uptime"),
        "loadavg_before": os.getloadavg(),
    }


def finished(env: dict[str, Any]) -> None:
    """Add the load and the source state at the end; warn when the source changed meanwhile."""
    env.update(uptime_after=sh("uptime"), loadavg_after=os.getloadavg())
    env["torchpace_git_after"] = git_state()
    if env["torchpace_git_after"] != env["torchpace_git"]:
        print(
            f"WARNING: torchpace's source changed during the run ({env['torchpace_git']} -> "
            f"{env['torchpace_git_after']}); measure again on a quiet tree"
        )
