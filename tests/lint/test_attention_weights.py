"""TP307 follows returned attention maps up to the training loop (issue 32, change sets' recall).

The fixture has the shape of graykode/nlp-tutorial's ``5-1.Transformer/Transformer.py`` (MIT),
shortened: the attention returns its map, each layer returns it, the encoder and decoder
collect one per layer in a list they return, and the script's training loop binds the lists
on every step and plots the last step's after training. The judges listed the attention as a
slow pattern (four copies: two scripts, two notebooks); lint missed it.
"""

from __future__ import annotations

import textwrap

from torchpace.lint import RULES, FileResult, lint_source

SOURCE = """
import numpy as np
import torch
import torch.nn as nn


class ScaledDotProductAttention(nn.Module):
    def forward(self, Q, K, V, attn_mask):
        scores = torch.matmul(Q, K.transpose(-1, -2)) / np.sqrt(64)
        scores.masked_fill_(attn_mask, -1e9)
        attn = nn.Softmax(dim=-1)(scores)
        context = torch.matmul(attn, V)
        return context, attn


class MultiHeadAttention(nn.Module):
    def forward(self, Q, K, V, attn_mask):
        context, attn = ScaledDotProductAttention()(Q, K, V, attn_mask)
        return self.linear(context), attn


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc_self_attn = MultiHeadAttention()

    def forward(self, enc_inputs, mask):
        enc_outputs, attn = self.enc_self_attn(enc_inputs, enc_inputs, enc_inputs, mask)
        return enc_outputs, attn


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.dec_self_attn = MultiHeadAttention()

    def forward(self, dec_inputs, mask):
        dec_outputs, attn = self.dec_self_attn(dec_inputs, dec_inputs, dec_inputs, mask)
        return dec_outputs, attn, None


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer() for _ in range(6)])

    def forward(self, x, mask):
        attns = []
        for layer in self.layers:
            x, attn = layer(x, mask)
            attns.append(attn)
        return x, attns


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer() for _ in range(6)])

    def forward(self, x, mask):
        attns = []
        for layer in self.layers:
            x, attn, _ = layer(x, mask)
            attns.append(attn)
        return x, attns


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()

    def forward(self, enc_inputs, dec_inputs, mask):
        enc_outputs, enc_attns = self.encoder(enc_inputs, mask)
        dec_outputs, dec_attns = self.decoder(dec_inputs + enc_outputs, mask)
        return dec_outputs, enc_attns, dec_attns


model = Transformer()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
for epoch in range(20):
    optimizer.zero_grad()
    outputs, enc_attns, dec_attns = model(enc_inputs, dec_inputs, mask)
    loss = criterion(outputs, target)
    loss.backward()
    optimizer.step()

predict, _, _ = model(enc_inputs, dec_inputs, mask)
showgraph(enc_attns)
showgraph(dec_attns)
"""


def _lines(source: str) -> list[int]:
    result = lint_source("train.py", textwrap.dedent(source).encode(), RULES)
    assert isinstance(result, FileResult), result
    return [f.location.line for f in result.findings if f.code == "TP307"]


def test_maps_collected_per_layer_and_read_only_after_training_are_dropped_each_step():
    # Three readings at once: the last step's value read only after the loop; a map appended
    # to a list the function only returns; and the decoder's ``for layer in self.layers``,
    # over DecoderLayers that return three values, is no call site of the encoder's layers.
    assert _lines(SOURCE) == [9]


def test_maps_the_training_loop_reads_are_kept():
    # read inside the loop, on every step: the caller wants them, the fused kernels return none
    kept = SOURCE.replace("    optimizer.step()\n", "    optimizer.step()\n    log(enc_attns)\n")
    assert _lines(kept) == []


def test_a_list_read_again_before_it_is_returned_is_kept():
    kept = SOURCE.replace(
        "        return x, attns\n", "        self.last = attns\n        return x, attns\n", 1
    )
    assert kept != SOURCE
    assert _lines(kept) == []
