"""A model file's self test (issue 32): a few steps over random inputs under
`if __name__ == "__main__":` is a memory check or a timing demo, not the training run; its
lines are not findings. Cut after kohya-ss/sd-scripts' `library/sdxl_original_unet.py` (corpus 2,
change half)."""

from __future__ import annotations

from torchpace.lint import RULES, FileResult, lint_source

MODEL_FILE = """
import time
import torch
import torch.nn as nn


class UNet(nn.Module):
    def forward(self, x, t, ctx, y):
        return x


if __name__ == "__main__":
    unet = UNet()
    unet.to("cuda")
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
    scaler = torch.cuda.amp.GradScaler(enabled=True)
    steps = 10
    for step in range(steps):
        x = torch.randn(1, 4, 128, 128).cuda()
        ctx = torch.randn(1, 77, 2048).cuda()
        with torch.autocast("cuda"):
            output = unet(x, None, ctx, None)
            loss = torch.nn.functional.mse_loss(output, torch.randn_like(output))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        print(loss.item())
"""


def _codes(source: str) -> list[str]:
    result = lint_source("sdxl_unet.py", source.encode(), [r for r in RULES if r.default])
    assert isinstance(result, FileResult), result
    return sorted(f.code for f in result.findings if f.code != "TP301")


def test_a_few_random_steps_under_main_are_a_self_test():
    assert _codes(MODEL_FILE) == []


def test_a_long_run_or_real_data_is_training():
    long_run = MODEL_FILE.replace("steps = 10", "steps = 100_000")
    assert {"TP201", "TP207"} <= set(_codes(long_run))
    with_data = MODEL_FILE.replace(
        "        x = torch.randn(1, 4, 128, 128).cuda()\n",
        "        x = next(batches).cuda()\n",
    )
    from torchpace.lint.engine import parse

    assert len(parse("x.py", with_data.encode()).loops.step_loops) == 1  # reads data: trains
    assert parse("x.py", MODEL_FILE.encode()).loops.step_loops == []
