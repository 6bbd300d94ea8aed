"""Graph-network training scripts (issue 32's change-3 set, snap-stanford/ogb's examples): a
loader of indices, and a model of embeddings alone. The fixtures are cut from ogb's
linkproppred/collab/mlp.py and nodeproppred/arxiv/node2vec.py (MIT), shortened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchpace.cli import main
from torchpace.lint import RULES, FileResult, lint_source

INDEX_LOADER = """
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def train(predictor, x, split_edge, optimizer, batch_size):
    pos_train_edge = split_edge["train"]["edge"].to(x.device)
    for perm in DataLoader(range(pos_train_edge.size(0)), batch_size, shuffle=True):
        optimizer.zero_grad()
        edge = pos_train_edge[perm].t()
        pos_out = predictor(x[edge[0]], x[edge[1]])
        loss = -torch.log(pos_out + 1e-15).mean()
        loss.backward()
        optimizer.step()
"""

NODE2VEC = """
import torch
from torch_geometric.nn import Node2Vec

device = torch.device("cuda")
model = Node2Vec(edge_index, 128, 80, 20, 10, sparse=True).to(device)
loader = model.loader(batch_size=256, shuffle=True, num_workers=4)
optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=0.01)
for epoch in range(1, 6):
    for i, (pos_rw, neg_rw) in enumerate(loader):
        optimizer.zero_grad()
        loss = model.loss(pos_rw.to(device), neg_rw.to(device))
        loss.backward()
        optimizer.step()
"""


def _lint_here(capsys: pytest.CaptureFixture[str], code: str, files: dict[str, str]) -> list:
    """``torchpace lint . --select code`` over ``files`` written to the current folder: the
    findings' JSON."""
    for name, text in files.items():
        Path(name).write_text(text)
    main(["lint", ".", "--select", code, "--format", "json"])
    return list(json.loads(capsys.readouterr().out))


def _codes(source: str) -> list[str]:
    result = lint_source("train.py", source.encode(), RULES)
    assert isinstance(result, FileResult), result
    return [f.code for f in result.findings]


def test_a_loader_of_indices_is_not_asked_for_workers_nor_pinning():
    # 18 such loaders in ogb's link-prediction and full-graph scripts, judged debatable: a
    # batch is 65,536 ints, and workers would only batch them
    assert not {"TP101", "TP102"} & set(_codes(INDEX_LOADER))
    for dataset in ("torch.arange(n)", "list(range(n))", "indices"):
        source = INDEX_LOADER.replace("range(pos_train_edge.size(0))", dataset)
        source = source.replace("def train", "indices = range(10)\n\n\ndef train")
        assert "TP101" not in _codes(source), dataset
    # a dataset of samples still wants workers, and pinning once it has them
    samples = INDEX_LOADER.replace("range(pos_train_edge.size(0))", "EdgeDataset(split_edge)")
    assert "TP101" in _codes(samples)
    pinned = samples.replace("shuffle=True)", "shuffle=True, num_workers=4)")
    assert "TP102" in _codes(pinned)
    # a ``range`` that is not the builtin is read as any other dataset
    shadowed = "from mydata import range\n" + INDEX_LOADER
    assert "TP101" in _codes(shadowed)


def test_an_embedding_model_is_not_asked_for_autocast():
    # ogb's node2vec and metapath2vec scripts (9 findings, judged false: no matmul): the loss
    # is lookups and row-wise dot products, which autocast does not cast
    assert "TP302" not in _codes(NODE2VEC)
    table = NODE2VEC.replace(
        "Node2Vec(edge_index, 128, 80, 20, 10, sparse=True)", "torch.nn.Embedding(1000, 128)"
    )
    assert "TP302" not in _codes(table)
    # a classifier trained in the same loop has matmuls to cast
    with_head = NODE2VEC.replace(
        "loss = model.loss(pos_rw.to(device), neg_rw.to(device))",
        "loss = model.loss(pos_rw.to(device), neg_rw.to(device)) + head(model()).sum()",
    ).replace("optimizer = ", "head = torch.nn.Linear(128, 40).to(device)\noptimizer = ")
    assert "TP302" in _codes(with_head)


PYG_LOADER = """
import argparse
import torch
from torch_geometric.loader import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--num_workers", type=int, default=0)
args = parser.parse_args()
device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
train_loader = DataLoader(dataset[split_idx["train"]], batch_size=32, shuffle=True,
                          num_workers=args.num_workers)
valid_loader = DataLoader(dataset[split_idx["valid"]], batch_size=32, shuffle=False,
                          num_workers=args.num_workers)
for epoch in range(1, 101):
    for step, batch in enumerate(train_loader):
        batch = batch.to(device)
        loss = criterion(model(batch), batch.y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_pygs_dataloader_is_read_as_torchs():
    # ogb's graphproppred and pcqm4m scripts (7 patterns, listed before the change): PyG's
    # DataLoader subclasses torch's and hands it num_workers; --num_workers defaults to 0
    result = lint_source("train.py", PYG_LOADER.encode(), RULES)
    assert isinstance(result, FileResult), result
    assert [f.location.line for f in result.findings if f.code == "TP101"] == [11]
    dgl = PYG_LOADER.replace("torch_geometric.loader", "dgl.dataloading").replace(
        "import DataLoader", "import GraphDataLoader as DataLoader"
    )
    assert "TP101" in _codes(dgl)
    other = PYG_LOADER.replace("torch_geometric.loader", "mylib.loaders")
    assert "TP101" not in _codes(other)  # a loader class lint does not know


SAINT = """
import torch
from torch_geometric.loader import GraphSAINTRandomWalkSampler, NeighborSampler

device = torch.device("cuda")
loader = GraphSAINTRandomWalkSampler(data, batch_size=20000, walk_length=2, num_steps=30)
neighbor_loader = NeighborSampler(data.edge_index, sizes=[25, 20], batch_size=1024, shuffle=True,
                                  num_workers=12)
for epoch in range(1, 31):
    for batch in loader:
        batch = batch.to(device)
        loss = model(batch.x, batch.edge_index).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for batch_size, n_id, adjs in neighbor_loader:
        adjs = [adj.to(device) for adj in adjs]
        loss = model(x[n_id].to(device), adjs).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_pygs_subgraph_samplers_are_read_as_torchs_loader():
    # ogb's nodeproppred/mag and products scripts (MIT), shortened: PyG's samplers of subgraphs
    # subclass torch's DataLoader (listed by change-3's judges before the change: a sampler
    # without workers walks the graph in the training process; one with 12 workers copies its
    # unpinned subgraphs to the GPU)
    assert _loader_findings(SAINT) == [(6, "TP101"), (7, "TP102"), (7, "TP104")]
    older = SAINT.replace("torch_geometric.loader", "torch_geometric.data")  # PyG before 2.0
    assert _loader_findings(older) == [(6, "TP101"), (7, "TP102"), (7, "TP104")]


INFERENCE_LOADER = """
import torch
from torch_geometric.loader import ClusterLoader, NeighborSampler

device = torch.device("cuda")
train_loader = ClusterLoader(cluster_data, batch_size=32, shuffle=True, num_workers=12)
subgraph_loader = NeighborSampler(data.edge_index, sizes=[-1], batch_size=1024,
                                  shuffle=False, num_workers=12)
subgraph_loader.data.num_nodes = data.num_nodes


@torch.no_grad()
def test(model, data):
    model.eval()
    return model.inference(data.x, subgraph_loader)


for epoch in range(1, 51):
    for batch in train_loader:
        batch = batch.to(device)
        loss = model(batch.x, batch.edge_index).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if epoch % 5 == 0:
        test(model, data)
"""


def test_a_loader_only_handed_to_evaluation_does_not_feed_training():
    # ogb's nodeproppred/products/cluster_gcn.py (MIT), shortened: the layer-wise inference
    # loader is only given to model.inference() in a @torch.no_grad() test(); change-3's judges
    # called its TP102 and TP104 findings false (eval-context)
    assert _loader_findings(INFERENCE_LOADER) == [(6, "TP102"), (6, "TP104")]  # training's only
    trained = INFERENCE_LOADER.replace("in train_loader:", "in subgraph_loader:")
    assert (7, "TP102") in _loader_findings(trained)


def _loader_findings(source: str) -> list[tuple[int, str]]:
    result = lint_source("train.py", source.encode(), RULES)
    assert isinstance(result, FileResult), result
    return sorted((f.location.line, f.code) for f in result.findings if f.code[:4] == "TP10")


GRAPH_ON_GPU = """
import torch
from torch_geometric.loader import NeighborLoader

device = torch.device("cuda")
data = dataset[0].to(device, "x", "y")
train_loader = NeighborLoader(data, input_nodes=data.train_mask, num_neighbors=[25, 10],
                              batch_size=1024, shuffle=True, num_workers=6,
                              persistent_workers=True)
for epoch in range(1, 11):
    for batch in train_loader:
        loss = model(batch.x, batch.edge_index.to(device)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    "moved",
    [
        'data = dataset[0].to(device, "x", "y")',  # bound to the moved graph
        'data = dataset[0]\ndata.to(device, "x", "y")',  # moved in place (PyG's Data.to)
        "data = dataset[0]\ndata.x = data.x.to(device)",  # its features only
    ],
)
def test_pinning_is_not_asked_of_a_pyg_sampler_whose_graph_is_on_the_gpu(moved):
    # PyG's NeighborLoader gathers a batch's features in the main process, from the device,
    # when the graph holds CUDA tensors (filter_per_worker inferred False): the workers and
    # their pinning see only the sampled indices. A graph left in host memory is asked.
    source = GRAPH_ON_GPU.replace('data = dataset[0].to(device, "x", "y")', moved)
    assert "TP102" not in _codes(source)
    on_host = GRAPH_ON_GPU.replace('data = dataset[0].to(device, "x", "y")', "data = dataset[0]")
    assert "TP102" in _codes(on_host)


KGE_RUN = """
import torch
from model import KGEModel

kge_model = KGEModel(model_name="TransE", nentity=100, nrelation=10, hidden_dim=500)
kge_model = kge_model.cuda()
optimizer = torch.optim.Adam(kge_model.parameters(), lr=1e-4)
for step in range(0, 100000):
    log = kge_model.train_step(kge_model, optimizer, train_iterator, args)
    training_logs.append(log)
"""

KGE_MODEL = """
import torch
import torch.nn as nn


class KGEModel(nn.Module):
    @staticmethod
    def train_step(model, optimizer, train_iterator, args):
        model.train()
        optimizer.zero_grad()
        positive_sample, negative_sample, subsampling_weight, mode = next(train_iterator)
        positive_sample = positive_sample.cuda()
        loss = model(positive_sample).mean()
        loss.backward()
        optimizer.step()
        return {"loss": loss.item()}
"""


def test_a_step_function_of_another_file_given_the_optimizer_makes_a_training_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ogb's KGE scripts (biokg, wikikg2): the loop only calls kge_model.train_step(kge_model,
    # optimizer, ...), a static method of model.py; the per-step .item() of its logged loss
    # was listed by the judges and went unreported. ``kge_model = kge_model.cuda()`` also hid
    # the instance's class from the step's entry into model.py.
    monkeypatch.chdir(tmp_path)
    found = _lint_here(capsys, "TP201", {"run.py": KGE_RUN, "model.py": KGE_MODEL})
    assert [(f["path"], f["line"]) for f in found] == [("model.py", 16)]
    # named for an epoch, the same call is not a step: its own loop is where steps are
    epoch = {
        "run.py": KGE_RUN.replace("train_step", "train_one_epoch"),
        "model.py": KGE_MODEL.replace("train_step", "train_one_epoch"),
    }
    assert _lint_here(capsys, "TP201", epoch) == []


KGE_FORWARD = """

    def __init__(self, nentity, nrelation, hidden_dim):
        super().__init__()
        self.entity_embedding = nn.Parameter(torch.zeros(nentity, hidden_dim))
        self.relation_embedding = nn.Parameter(torch.zeros(nrelation, hidden_dim))

    def forward(self, sample):
        head = torch.index_select(self.entity_embedding, dim=0, index=sample[:, 0])
        relation = torch.index_select(self.relation_embedding, dim=0, index=sample[:, 1])
        tail = torch.index_select(self.entity_embedding, dim=0, index=sample[:, 2])
        return 12.0 - torch.norm(head + relation - tail, p=1, dim=1)
"""


def test_a_model_of_embedding_parameters_in_a_project_file_is_not_asked_for_autocast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ogb's KGE models (TransE, RotatE, ComplEx, DistMult): two nn.Parameter tables read with
    # index_select, scored with sums and norms; judged false (no-matmul) when TP302 fired. The
    # loop's tensorboard writer is not a model.
    monkeypatch.chdir(tmp_path)
    run = (
        KGE_RUN.replace("for step", "writer = SummaryWriter()\nfor step")
        .replace(
            "import torch\n", "import torch\nfrom torch.utils.tensorboard import SummaryWriter\n"
        )
        .replace("training_logs.append(log)", "writer.add_scalar('loss', log['loss'], step)")
    )
    model = KGE_MODEL.replace(
        "class KGEModel(nn.Module):", "class KGEModel(nn.Module):" + KGE_FORWARD
    )
    assert _lint_here(capsys, "TP302", {"run.py": run, "model.py": model}) == []
    # one Linear in the model: autocast has a matmul to run (a wide one: the model, now sized
    # in its own file, is not small)
    dense = model.replace(
        "super().__init__()\n", "super().__init__()\n        self.proj = nn.Linear(4096, 4096)\n"
    )
    found = _lint_here(capsys, "TP302", {"model.py": dense})
    assert [f["path"] for f in found] == ["run.py"]


# Cut from pytorch_geometric_temporal's examples/recurrent/a3tgcn2_example.py (MIT), shortened:
# an attention temporal GCN of 32 channels over METR-LA's 207 sensors, trained on CUDA.
NARROW_GRAPH_NET = """
import torch
import torch.nn.functional as F
from torch_geometric_temporal.nn.recurrent import A3TGCN2

DEVICE = torch.device("cuda")
batch_size = 32
train_loader = torch.utils.data.DataLoader(train_dataset_new, batch_size=batch_size, shuffle=True)


class TemporalGNN(torch.nn.Module):
    def __init__(self, node_features, periods, batch_size):
        super(TemporalGNN, self).__init__()
        self.tgnn = A3TGCN2(
            in_channels=node_features, out_channels=WIDTH, periods=periods, batch_size=batch_size
        )
        self.linear = torch.nn.Linear(WIDTH, periods)

    def forward(self, x, edge_index):
        h = self.tgnn(x, edge_index)
        h = F.relu(h)
        return self.linear(h)


model = TemporalGNN(node_features=2, periods=12, batch_size=batch_size).to(DEVICE)
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
loss_fn = torch.nn.MSELoss()
for epoch in range(30):
    loss_list = []
    for encoder_inputs, labels in train_loader:
        y_hat = model(encoder_inputs, static_edge_index)
        loss = loss_fn(y_hat, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss_list.append(loss.item())
"""

# PyG's GCN on a citation graph (the shape of its examples/gcn.py): the input side is the
# data's width, the hidden side a size the file gives.
CITATION_GCN = """
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv

device = torch.device("cuda")


class GCN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden_channels, cached=True)
        self.conv2 = GCNConv(hidden_channels, out_channels, cached=True)

    def forward(self, x, edge_index):
        x = F.relu(self.conv1(x, edge_index))
        return self.conv2(x, edge_index)


model = GCN(dataset.num_features, WIDTH, dataset.num_classes).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(200):
    for data in loader:
        data = data.to(device)
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize("fixture", [NARROW_GRAPH_NET, CITATION_GCN])
def test_autocast_is_not_advised_for_a_graph_net_of_at_most_64_channels(fixture: str) -> None:
    """TP302 (issue 32): the judges called autocast for these nets negligible every time (14 of
    pytorch_geometric_temporal's loops): their products are 32 channels wide. At 256 channels
    (ogb's GCNs over whole graphs, judged true) the finding stays."""
    narrow = _codes(fixture.replace("WIDTH", "32"))
    assert "TP302" not in narrow
    # num_classes is read from the data, as its width is: at most 64 channels beside it.
    assert "TP302" in _codes(fixture.replace("WIDTH", "256"))


def test_a_sync_in_a_narrow_graph_nets_loop_is_still_reported() -> None:
    """A graph's size, not its width, sets how long the device works on a step: a per-step
    ``loss.item()`` there (judged true on PeMS's 11k-sensor batches) is not a small model's."""
    assert "TP201" in _codes(NARROW_GRAPH_NET.replace("WIDTH", "32"))


def test_a_graph_layer_whose_width_the_file_does_not_give_is_unknown() -> None:
    assert "TP302" in _codes(NARROW_GRAPH_NET.replace("WIDTH", "args.hidden"))


# GIN, whose layers take their MLP as an argument (PyG's examples/mutag_gin.py, shortened).
GIN = """
import torch
import torch.nn.functional as F
from torch.nn import Linear, ReLU, Sequential
from torch_geometric.nn import GINConv, global_add_pool

device = torch.device("cuda")


class GIN(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels):
        super().__init__()
        self.conv1 = GINConv(Sequential(Linear(in_channels, hidden), Linear(hidden, hidden)))
        self.conv2 = GINConv(Sequential(Linear(hidden, hidden), ReLU(), Linear(hidden, hidden)))
        self.lin = Linear(hidden, out_channels)

    def forward(self, x, edge_index, batch):
        x = self.conv2(self.conv1(x, edge_index).relu(), edge_index)
        return self.lin(global_add_pool(x, batch))


model = GIN(9, WIDTH, 2).to(device)  # 9 atom features a node, two classes
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for data in train_loader:
    data = data.to(device)
    optimizer.zero_grad()
    loss = F.cross_entropy(model(data.x, data.edge_index, data.batch), data.y)
    loss.backward()
    optimizer.step()
"""


def test_a_gin_is_as_narrow_as_the_mlps_it_is_handed() -> None:
    assert "TP302" not in _codes(GIN.replace("WIDTH", "32"))
    assert "TP302" in _codes(GIN.replace("WIDTH", "300"))  # ogb's GIN-virtual: judged true
