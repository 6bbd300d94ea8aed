"""TP302 on a graph net trained on a small citation graph (issue 32, the twenty-fifth session).

Judges called autocast debatable on every graph net trained on Cora, CiteSeer or PubMed, at any
width (GCNII's 64 layers of 64, DGI's 1433-512 GCN, change sets 9 and 31): a few thousand rows
are microseconds of matrix work. The narrow-graph exemption (64 channels a side) did not cover
the wider ones. Each test fails on the rules before the change; the controls hold on both."""

from __future__ import annotations

from lint_findings import findings

TRAIN = """
import argparse
import torch
import torch.nn.functional as F
from torch_geometric.datasets import Planetoid
from torch_geometric.nn import GCNConv

parser = argparse.ArgumentParser()
parser.add_argument("--dataset", default={default!r}{choices})
parser.add_argument("--data_path", default="./data")
args = parser.parse_args()
dataset = Planetoid(args.data_path, args.dataset)
data = dataset[0].to("cuda")


class Net(torch.nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.conv1 = GCNConv(features, 512)
        self.conv2 = GCNConv(512, classes)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


model = Net(dataset.num_features, dataset.num_classes).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(200):
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out, data.y)
    loss.backward()
    optimizer.step()
"""


def _tp302(default: str, choices: str = "") -> list[tuple[str, int]]:
    return findings(TRAIN.format(default=default, choices=choices), "TP302")


def test_a_wide_graph_net_on_cora_is_left_alone() -> None:
    assert _tp302("Cora") == []
    assert _tp302("PubMed", ', choices=["Cora", "CiteSeer", "PubMed"]') == []


def test_another_graph_is_not_known_small() -> None:
    assert _tp302("Reddit") == [("TP302", 28)]


def test_an_option_that_offers_a_large_graph_keeps_the_finding() -> None:
    assert _tp302("Cora", ', choices=["Cora", "ogbn-arxiv"]') == [("TP302", 28)]


def test_a_listed_name_that_is_not_the_default_does_not_count() -> None:
    # GRACE: ``assert name in ["Cora", "CiteSeer", "PubMed", "DBLP"]``, ``--dataset`` DBLP
    # and ``--dataset`` is required: no default decides it
    source = TRAIN.format(default="DBLP", choices="").replace("default='DBLP'", "required=True")
    source = source.replace(
        "dataset = Planetoid(", 'assert args.dataset in ["Cora", "DBLP"]\ndataset = Planetoid('
    )
    assert findings(source, "TP302") == [("TP302", 29)]
