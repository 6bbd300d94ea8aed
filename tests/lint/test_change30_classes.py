"""Classes change-30 showed, fixed in general (issue 32, the twenty-fourth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings

# A diffusion transformer's timestep embedding, run by every forward: the frequencies are built
# on the host from a factory, scaled by a number from ``math``, then copied to the timesteps'
# device (minRF's DiT, guided-diffusion's ``timestep_embedding``).
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


def test_host_frequencies_scaled_by_a_math_constant_then_moved_are_reported() -> None:
    assert findings(TIMESTEPS, "TP207") == [("TP207", 16)]


def test_frequencies_scaled_by_a_device_tensor_are_not_host_built() -> None:
    # the product runs where ``scale`` is: nothing says it is on the host
    scaled = TIMESTEPS.replace("-math.log(max_period)", "-scale.log()")
    assert findings(scaled, "TP207") == []


# MoCo v3's contrastive loss, a method its forward calls twice a step: the labels are an arange
# built on the host, offset by the process's rank, then copied with ``.cuda()``.
CONTRASTIVE = """
import torch
import torch.distributed
from torch import nn


class MoCo(nn.Module):
    def __init__(self, base_encoder, T=1.0):
        super().__init__()
        self.base_encoder = base_encoder
        self.T = T

    def contrastive_loss(self, q, k):
        logits = torch.einsum("nc,mc->nm", [q, k]) / self.T
        N = logits.shape[0]
        labels = (torch.arange(N, dtype=torch.long) + N * torch.distributed.get_rank()).cuda()
        return nn.CrossEntropyLoss()(logits, labels) * (2 * self.T)

    def forward(self, x1, x2):
        q1, q2 = self.base_encoder(x1), self.base_encoder(x2)
        return self.contrastive_loss(q1, q2) + self.contrastive_loss(q2, q1)
"""


def test_host_labels_offset_by_the_rank_then_moved_are_reported() -> None:
    assert findings(CONTRASTIVE, "TP207") == [("TP207", 16)]


def test_labels_offset_by_a_device_value_are_not_host_built() -> None:
    offset = CONTRASTIVE.replace("N * torch.distributed.get_rank()", "N * rank_tensor.max()")
    assert findings(offset, "TP207") == []


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
    for value in ("0", "image_embd.sum().to(token_embd.dtype)", "float('-inf')"):
        filled = IMAGE_TOKENS.replace(
            "image_embd.view(-1, image_embd.size(-1)).to(token_embd.dtype)", value
        )
        assert findings(filled, "TP203") == [], value
