"""Shared by the report tests: the committed result fixtures (from a real demo run and a real
2-rank gloo doctor run, paths rewritten to /home/ada/project) and copies to plant strings in."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
DOCTOR = DATA / "doctor-cnn.json"
DOCTOR_DDP = DATA / "doctor-ddp.json"
TUNE = DATA / "tune-cnn.json"
TUNE_SCRIPT = DATA / "tune-script.json"  # a real `torchpace tune planted.py -- --steps 200`


def result(path: Path) -> dict[str, Any]:
    return copy.deepcopy(json.loads(path.read_text()))
