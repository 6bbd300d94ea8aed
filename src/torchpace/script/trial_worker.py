"""A script's tune trial, in this (fresh) process:
``python -m torchpace.script.trial_worker SPEC.json OUT.json`` (the tune's runner starts it for a
script's trials: the tune's worker with the script trial's ``run``)."""

from __future__ import annotations

from torchpace.script.trial import run
from torchpace.tune.worker import main

if __name__ == "__main__":
    raise SystemExit(main(run=run))
