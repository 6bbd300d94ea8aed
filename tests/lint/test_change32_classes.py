"""Classes change-32 showed, fixed in general (issue 32, the twenty-fourth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings

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
