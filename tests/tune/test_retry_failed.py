"""Failed trials in the cache (issue 17): a transient cause (a timeout, a full disk, a kill from
outside) is run again on the next tune; a failure of the plan is replayed from the cache unless
`--retry-failed` asks; good trials are never run again."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.train.plan import Plan
from torchpace.tune import search
from torchpace.tune.results import ResultsFile
from torchpace.tune.search import Settings, _Runner
from torchpace.tune.trial import TrialResult


def _runner(tmp_path: Path, *, retry_failed: bool = False) -> _Runner:
    s = Settings(recipe="cnn", retry_failed=retry_failed)
    return _Runner(s, ResultsFile(tmp_path / "trials.jsonl"), tmp_path / "work", lambda n, u: None)


@pytest.mark.parametrize(
    "status, reason, runs_again",
    [
        ("timeout", "no result after 180 s: the trial was killed", True),
        ("failed", "OSError: [Errno 28] No space left on device", True),
        ("failed", "the worker was killed by SIGKILL without writing a result", True),
        ("failed", "RuntimeError: channels_last needs a 4-d input", False),
        ("oom", "CUDA out of memory", False),
        ("ok", "", False),
    ],
)
def test_which_cached_trials_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str, reason: str, runs_again: bool
) -> None:
    ran: list[str] = []

    def fake_run_trial(spec, **kw):  # type: ignore[no-untyped-def]
        ran.append(spec.name)
        return TrialResult(spec.key(), spec.name, "ok", wall_seconds=1.0)

    monkeypatch.setattr(search, "run_trial", fake_run_trial)
    first = _runner(tmp_path)
    key = first.run("probe", Plan()).key  # runs once and caches "ok"
    ran.clear()
    first.results.append(TrialResult(key, "probe", status, reason=reason, wall_seconds=1.0))  # type: ignore[arg-type]
    assert _runner(tmp_path).run("probe", Plan()).status == ("ok" if runs_again else status)
    assert ran == (["probe"] if runs_again else [])
    ran.clear()
    again = _runner(tmp_path, retry_failed=True).run("probe", Plan())
    assert ran == ([] if status == "ok" or runs_again else ["probe"])
    assert again.status == "ok"
