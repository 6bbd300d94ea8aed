"""An exception handler in a training loop runs when a step fails, not on every step (issue 32,
the twenty-sixth session): DIG's ProNet example and PyG's txt2kg RAG example free the cache
after a CUDA out-of-memory error and skip the batch. The fixture has the shape of that code,
shortened; the test fails on the rules before the change, and the control holds on both."""

from __future__ import annotations

from lint_findings import findings

OOM = """
import torch

model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
for batch in loader:
    try:
        loss = model(batch.cuda()).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        print("skipped a batch", loss.item())
    {every_step}
"""


def test_what_an_error_handler_runs_is_not_every_step() -> None:
    assert findings(OOM.format(every_step="pass"), "TP206") == []
    assert findings(OOM.format(every_step="pass"), "TP201") == []


def test_the_same_calls_outside_the_handler_are() -> None:
    found = findings(OOM.format(every_step="torch.cuda.empty_cache()"), "TP206")
    assert found == [("TP206", 15)]


RETRY = """
import torch

model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
for batch in loader:
    try:
        loss = model(batch.cuda()).mean()
    except RuntimeError:
        loss = fallback(batch.cuda()).mean()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""


def test_a_handler_that_trains_is_step_code() -> None:
    assert findings(RETRY, "TP201") == [("TP201", 13)]
