"""Classes of findings judged on change-37 (issue 32), each cut from the code it was seen in and
checked the other way round: what a GPU training step does is still reported."""

from __future__ import annotations

from lint_findings import findings

# RITM's interactive-segmentation trainer drops the previous mask of a random share of the batch:
# the mask is a NumPy array of booleans, so its count is known on the host and nothing waits.
DROPPED_MASKS = """
import numpy as np
import torch

net = Net().cuda()
optimizer = torch.optim.Adam(net.parameters())
for batch in loader:
    image, prev_output = batch["image"].cuda(), batch["prev"].cuda()
    {mask}
    prev_output[zero_mask] = torch.zeros_like(prev_output[zero_mask])
    loss = net(torch.cat((image, prev_output), dim=1)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_mask_numpy_computes_selects_without_a_wait_and_a_device_comparison_still_waits() -> None:
    host = "zero_mask = np.random.random(size=prev_output.size(0)) < drop_prob"
    assert findings(DROPPED_MASKS.format(mask=host), "TP203") == []
    # on the device: the write through the mask and the read of it each wait
    device = "zero_mask = torch.rand(prev_output.size(0), device='cuda') < drop_prob"
    assert findings(DROPPED_MASKS.format(mask=device), "TP203") == [("TP203", 10)] * 2
    named = "zero_mask = prev_output.sum((1, 2, 3)) > 0"
    assert findings(DROPPED_MASKS.format(mask=named), "TP203") == [("TP203", 10)] * 2
