"""The review of the twenty-sixth session's lint changes (issue 32): each case is a small file or
project a helper who wrote none of the changes built to reproduce a defect, and what lint must
report on it now (fixtures/session26_review.json, the cases as the reviewer wrote them). Each
failed on the reviewed code (40ba8d0): a factory's workers given by another call, or by a
constant or option of 0; a factory's loader rebuilt each epoch, or whose dataset the epoch loop
changes; waits after a forward or an EMA update, or after reads that do not wait; a barrier after
a block only the main process runs; a re-exported helper or factory; a loader peeked at while a
function's own loader of that name is handed on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lint_findings import findings, project_findings

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "session26_review.json").read_text()
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_review_case(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = project_findings(tmp_path, case["files"], case["select"], capsys)
    where = [[Path(f["path"]).relative_to(tmp_path).as_posix(), f["line"]] for f in found]
    assert where == case["expected"]


# The latch a resumed run's fast-forward turns off runs once only where its other branch skips
# the step; a warm-up that trains until it turns itself off runs every step until then.
WARMUP = """
import torch
import torch.distributed as dist

model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
warming = True
for i, batch in enumerate(loader):
    if warming:
        if i < warmup_steps:
            {branch}
        else:
            warming = False
            dist.barrier()
    loss = model(batch.cuda()).mean()
    loss.backward()
    optimizer.step()
"""


def test_a_latch_turned_off_after_skipped_steps_runs_once_and_after_trained_ones_does_not() -> None:
    assert findings(WARMUP.format(branch="continue"), "TP205") == []
    trained = (
        "model(batch.cuda()).mean().backward()\n"
        "            optimizer.step()\n"
        "            dist.barrier()"
    )
    # the warm-up's own barrier, and the one where it ends (the if's body is step code)
    assert findings(WARMUP.format(branch=trained), "TP205") == [("TP205", 13), ("TP205", 16)]
