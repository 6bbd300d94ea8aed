"""Classes change-32 showed, fixed in general (issue 32, the twenty-fourth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings, notebook_findings

# A textbook's helper module holds its chapters' trainers: the chapter-3 one trains on the host
# whatever it is handed, the chapter-5 one moves its net and batches to the device. The net the
# chapter-5 trainer moves is its own parameter, not the chapter-3 trainer's: the CUDA loop
# without autocast is the chapter-5 one.
TRAINERS = """
import torch

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train_ch3(net, train_iter, loss, num_epochs, optimizer):
    for epoch in range(num_epochs):
        for X, y in train_iter:
            l = loss(net(X), y).sum()
            optimizer.zero_grad()
            l.backward()
            optimizer.step()


def train_ch5(net, train_iter, optimizer, device, num_epochs):
    net = net.to(device)
    loss = torch.nn.CrossEntropyLoss()
    for epoch in range(num_epochs):
        for X, y in train_iter:
            X, y = X.to(device), y.to(device)
            l = loss(net(X), y)
            optimizer.zero_grad()
            l.backward()
            optimizer.step()
"""


def test_the_cuda_loop_is_the_one_whose_own_net_is_moved() -> None:
    assert findings(TRAINERS, "TP302") == [("TP302", 20)]


def test_a_net_the_file_moves_is_still_the_one_a_trainer_is_handed() -> None:
    # a notebook's ``model = to_device(Net(), device)`` and ``fit(epochs, model, ...)``: the
    # file's binding may be what the trainer's parameter holds
    handed = TRAINERS.replace(
        "def train_ch3(", "net = ResNet().cuda()\n\n\ndef train_ch3("
    ).replace("    net = net.to(device)\n", "")
    handed = handed.replace("            X, y = X.to(device), y.to(device)\n", "")
    assert findings(handed, "TP302") == [("TP302", 12)]


# A textbook's seq2seq chapter as a notebook: a cell picks the CUDA device and prints it, but the
# encoder-decoder and its batches stay on the host, so the per-step reads wait for no device,
# and a loader's workers would take the step's cores.
SEQ2SEQ_CELLS = [
    """
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(device)
""",
    """
dataset = TranslationDataset("fr-en.txt")
data_iter = torch.utils.data.DataLoader(dataset, batch_size=2, shuffle=True)
encoder, decoder = Encoder(vocab, 64, 64), Decoder(vocab, 64, 64)
enc_opt = torch.optim.Adam(encoder.parameters())
dec_opt = torch.optim.Adam(decoder.parameters())
for epoch in range(50):
    l_sum = 0.0
    for X, Y in data_iter:
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        l = batch_loss(encoder, decoder, X, Y, loss)
        l.backward()
        enc_opt.step()
        dec_opt.step()
        l_sum += l.item()
""",
]


def test_reads_in_a_notebook_loop_that_trains_on_the_host_wait_for_nothing() -> None:
    assert notebook_findings(SEQ2SEQ_CELLS, "TP201") == []
    assert notebook_findings(SEQ2SEQ_CELLS, "TP101") == []


def test_the_same_loop_on_the_device_is_reported() -> None:
    moved = [
        SEQ2SEQ_CELLS[0],
        SEQ2SEQ_CELLS[1]
        .replace(
            "Decoder(vocab, 64, 64)",
            "Decoder(vocab, 64, 64)\nencoder, decoder = encoder.to(device), decoder.to(device)",
        )
        .replace(
            "        l = batch_loss",
            "        X, Y = X.to(device), Y.to(device)\n        l = batch_loss",
        ),
    ]
    assert notebook_findings(moved, "TP201") == [("TP201", 2, 18)]
    assert notebook_findings(moved, "TP101") == [("TP101", 2, 3)]


# nano-llama31's builder sets the default tensor type to CUDA bfloat16 (half where bf16 is not
# supported) before it builds the model: the fine-tuning loop already runs in 16 bits.
LLAMA = """
import torch


def build(params):
    if torch.cuda.is_bf16_supported():
        torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)
    else:
        torch.set_default_tensor_type(torch.cuda.HalfTensor)
    return Transformer(params)


model = build(params)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
for step in range(1000):
    x, y = get_batch("train")
    loss = model(x.cuda(), y.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_model_built_under_a_16_bit_default_tensor_type_needs_no_autocast() -> None:
    assert findings(LLAMA, "TP302") == []


def test_a_float32_default_tensor_type_leaves_the_loop_reported() -> None:
    float32 = LLAMA.replace("torch.cuda.BFloat16Tensor", "torch.cuda.FloatTensor").replace(
        "torch.cuda.HalfTensor", "torch.cuda.FloatTensor"
    )
    assert findings(float32, "TP302") == [("TP302", 15)]


# A textbook's word2vec: the model is an nn.Sequential of two embedding tables (centre and
# context words), used as net[0] and net[1]; the loss is a module of the notebook. Lookups and
# batched dot products: autocast has no matrix product worth casting.
WORD2VEC = """
import torch
from torch import nn


class SigmoidBinaryCrossEntropyLoss(nn.Module):
    def forward(self, inputs, targets, mask=None):
        return nn.functional.binary_cross_entropy_with_logits(inputs, targets, weight=mask)


loss = SigmoidBinaryCrossEntropyLoss()
net = nn.Sequential(nn.Embedding(10000, 100), nn.Embedding(10000, 100))


def train(net, lr, num_epochs):
    device = torch.device("cuda")
    net = net.to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    for epoch in range(num_epochs):
        for batch in data_iter:
            center, context, mask, label = [d.to(device) for d in batch]
            pred = torch.bmm(net[0](center), net[1](context).permute(0, 2, 1))
            l = loss(pred.view(label.shape), label, mask).mean()
            optimizer.zero_grad()
            l.backward()
            optimizer.step()
"""


def test_a_sequence_of_embedding_tables_trained_with_a_loss_module_needs_no_autocast() -> None:
    assert findings(WORD2VEC, "TP302") == []


def test_a_sequence_with_a_linear_layer_is_still_reported() -> None:
    linear = WORD2VEC.replace("nn.Embedding(10000, 100))", "nn.Linear(4096, 4096))")
    assert findings(linear, "TP302") == [("TP302", 20)]


# flow_matching's image training loop draws each step's timesteps on the host through the torch
# package's attribute of itself (``torch.torch.rand``, which is ``torch.rand``), then moves them.
TIMESTEPS = """
import torch

device = torch.device("cuda")
model = UNet().to(device)
optimizer = torch.optim.AdamW(model.parameters())
for samples, labels in data_loader:
    samples = samples.to(device, non_blocking=True)
    t = torch.torch.rand(samples.shape[0]).to(device)
    loss = model(samples, t).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_factory_spelled_through_torch_torch_is_the_same_factory() -> None:
    assert findings(TIMESTEPS, "TP207") == [("TP207", 9)]
