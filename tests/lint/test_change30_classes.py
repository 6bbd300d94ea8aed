"""Classes change-30 showed, fixed in general (issue 32, the twenty-fourth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings

# A diffusion model's timestep embedding, run by every forward: the frequencies are built on the
# host, scaled by a ``math`` function's result, then copied to the timesteps' device. Reading a
# ``math`` result (or the process's rank) as a host operand was tried and taken back: the
# findings it added were judged 0 true, 2 false, 9 debatable (128 floats a step beside a large
# model's kernels), so it stays unreported.
TIMESTEPS = """
import math
import torch
from torch import nn


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden_size, frequency_embedding_size=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size), nn.SiLU())
        self.frequency_embedding_size = frequency_embedding_size

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(
            -math.log(max_period) * torch.arange(start=0, end=half) / half
        ).to(t.device)
        args = t[:, None] * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    def forward(self, t):
        return self.mlp(self.timestep_embedding(t, self.frequency_embedding_size))
"""


def test_timestep_frequencies_scaled_by_a_math_result_stay_unreported() -> None:
    assert findings(TIMESTEPS, "TP207") == []


def test_timestep_frequencies_scaled_by_a_literal_are_reported() -> None:
    literal = TIMESTEPS.replace("-math.log(max_period)", "-9.21")
    assert findings(literal, "TP207") == [("TP207", 16)]


# DiT's label dropout, run by every training forward: a mask drawn on the host by comparing
# uniform noise with the dropout probability, then copied to the device.
DROPOUT = """
import torch
from torch import nn


class LabelEmbedder(nn.Module):
    def __init__(self, num_classes, hidden_size, dropout_prob):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + 1, hidden_size)
        self.num_classes = num_classes
        self.dropout_prob = dropout_prob

    def token_drop(self, labels):
        drop_ids = torch.rand(labels.shape[0]) < self.dropout_prob
        drop_ids = drop_ids.cuda()
        return torch.where(drop_ids, self.num_classes, labels)

    def forward(self, labels):
        return self.embedding_table(self.token_drop(labels))
"""


def test_a_mask_drawn_on_the_host_then_moved_is_reported() -> None:
    assert findings(DROPOUT, "TP207") == [("TP207", 14)]


def test_a_mask_compared_with_a_device_tensor_is_not_host_built() -> None:
    on_device = DROPOUT.replace("< self.dropout_prob", "< probs.sigmoid()")
    assert findings(on_device, "TP207") == []


# nanoVLM's vision-language model puts the image embeddings into the token embeddings through a
# mask of the image tokens, every step: a tensor of values assigned through a boolean mask is an
# index_put_, which turns the mask into indices first (a wait); one value is a masked fill.
IMAGE_TOKENS = """
import torch
from torch import nn
from transformers import AutoModel


class VisionLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = AutoModel.from_pretrained("gpt2")
        self.proj = nn.Linear(768, 768)

    def forward(self, input_ids, images, image_token_id):
        token_embd = self.decoder(input_ids).clone()
        image_embd = self.proj(images)
        mask = input_ids == image_token_id
        token_embd[mask] = image_embd.view(-1, image_embd.size(-1)).to(token_embd.dtype)
        return token_embd


model = VisionLanguageModel().cuda()
opt = torch.optim.AdamW(model.parameters())
for ids, images in loader:
    ids, images = ids.cuda(), images.cuda()
    loss = model(ids, images, 5).sum()
    loss.backward()
    opt.step()
"""


def test_a_tensor_of_values_put_through_a_mask_is_reported() -> None:
    assert findings(IMAGE_TOKENS, "TP203") == [("TP203", 17)]


def test_one_value_put_through_a_mask_is_a_masked_fill() -> None:
    for value in ("0", "torch.tensor(0.0)", "float('-inf')"):
        filled = IMAGE_TOKENS.replace(
            "image_embd.view(-1, image_embd.size(-1)).to(token_embd.dtype)", value
        )
        assert findings(filled, "TP203") == [], value
