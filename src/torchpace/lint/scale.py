"""Models too small for a GPU to set the step time: launch-bound training loops (issue 32).

A network whose every layer this file spells out, with sizes it can read, and that has at most
:data:`TINY_WEIGHTS` weights and no convolution wider than :data:`TINY_CONV_CHANNELS` channels,
runs each kernel in microseconds on a GPU: its step's time is Python and kernel launches (a
2-100-3 MLP on spiral points, a 784-30-784 autoencoder, LeNet, a 4-unit RNN). Autocast only adds
cast kernels to such a step, cuDNN's autotuner has nothing to choose between, and a sync per
step waits for a queue that is already empty. The judges of the lint corpus called those
findings "debatable: negligible" every time; the rules that report them leave such loops alone.

What counts is read, never guessed. A model is known when every module it builds is a
``torch.nn`` layer whose sizes are literals, module constants (also arithmetic of literals,
and a name a notebook binds again to the same size), option defaults or constructor
arguments with literal values, or a class of this file or of another file of the project
(``from model import Net``) built the same way, each read in its own file with the sizes its
caller passes; a class that derives from no module (a logger, a meter) and the objects of
logging and metric libraries have no weights. A class that keeps what it is handed and runs it
(``self.backbone = backbone``, then ``self.backbone(x)`` or ``self.backbone.forward_features(x)``)
holds a model whose size is not read there: it is unknown, unless its default and every call of
the class in the file hand it a torch function or a weightless layer (``activation=F.relu``).
One size is read from the data rather than the
file: a linear layer's side given as the data's width (``nn.Linear(x.shape[1], 50)``), beside
a side of at most :data:`NARROW_WIDTH` the file gives, is counted at :data:`DATA_WIDTH`. A layer
from a library (torchvision, timm) or a size the file cannot read makes the model unknown, and
unknown is never small. A loop is
launch-bound when it trains and every model it calls is known and small. A model reached through
a function's parameter (``def train(model, loader): ...``) is known when every call of that
function in the file passes a known small model.

A loop over small images (:func:`small_steps`) is read the other way round: there the sizer
counts a step's multiply-adds, every convolution at the image's largest size, and a step of at
most :data:`TINY_STEP_MACS` leaves autocast and cuDNN's autotuner nothing to gain. A sync per
step still costs such a loop its overlap with the host, so the sync rules report it.
"""

from __future__ import annotations

import ast
import builtins
import math
import re
import string
from collections import defaultdict
from collections.abc import Sequence
from functools import cached_property

from torchpace.lint.loops import (
    LOOPS,
    PARAMETERS,
    Function,
    Step,
    constructor,
    dotted,
    parameter_defaults,
    rewraps,
    strip_moves,
    walk,
    wrapped,
)
from torchpace.lint.rule import FileContext, argument, parameter_names, passed_for
from torchpace.lint.tree import subtree
from torchpace.lint.values import int_value, module_bindings, options

# What the rules that leave such loops alone say of it in their docs (docs/rules.md).
SMALL_MODELS_DOC = (
    "Not in the training loop of a small model: one whose every layer this file or notebook "
    "(or the project file that defines its class) builds with sizes it can read (literals, "
    "constants, option defaults, constructor arguments, the length of one of Python's `string` "
    "constants such as `len(string.printable)`; a linear layer of at most 64 units "
    "over the data's width, `nn.Linear(x.shape[1], 50)`, or to its classes, "
    "`nn.Linear(25, len(encoder.classes_))`), with at most a million weights (an embedding "
    "table counts one row, whatever the vocabulary: a lookup reads one row a token) and "
    "no convolution wider than 16 channels (a 2-100-3 MLP, LeNet, a 784-400-20 VAE). Its "
    "kernels take microseconds on a GPU, so the step's time is Python and kernel launches, "
    "which this change does not shorten. A model from a library, or a size the file does not "
    "give, is never taken as small."
)

# What the rules whose gain grows with the size of a step's matrix products say of graph nets.
GRAPH_MODELS_DOC = (
    "Nor where the model is a graph net whose layers (PyG's, DGL's or PyG Temporal's graph "
    "convolutions, attention and recurrent cells) have at most 64 channels a side, with the "
    "sizes read the same way (the data's width, or its number of classes, on one side): its "
    "matrix products are too narrow for 16-bit kernels to pay, and gathering and scattering "
    "messages along the edges is not what autocast speeds up."
)

# The citation graphs of Planetoid (Cora: 2,708 nodes, CiteSeer: 3,327, PubMed: 19,717) and
# Zachary's karate club: a whole graph is a few thousand rows, so even a 512-wide layer over all
# of it is microseconds of matrix work on a GPU; the step is kernel launches and message passing.
SMALL_GRAPHS = frozenset({"cora", "citeseer", "pubmed", "karate", "karateclub"})
# The option that names a dataset: ``--dataset``, ``--data``, ``--dataset_name``.
_DATASET_OPTION = re.compile(r"(data|dataset)(_?name)?")

# Where graph datasets are loaded from, the loaders of one small graph (named by the class),
# and those that load a small graph named by a string (``Planetoid(root, "Cora")``).
_GRAPH_DATA = ("torch_geometric.datasets.", "ogb.", "dgl.data.")
_SMALL_GRAPH_CLASSES = frozenset(
    {"KarateClub", "KarateClubDataset", "CoraGraphDataset", "CiteseerGraphDataset"}
    | {"PubmedGraphDataset"}
)
_SMALL_GRAPH_LOADERS = _SMALL_GRAPH_CLASSES | {"Planetoid", "CitationFull"}

SMALL_GRAPH_DOC = (
    "Nor a file that trains on one of the small citation graphs (Cora, CiteSeer, PubMed: at "
    "most 19,717 nodes; or the karate club), named by a string the file gives (`Planetoid(root, "
    "'Cora')`, `dataset = 'PubMed'`, an option's default) or by its loader's class "
    "(`KarateClub()`), where the file loads no other graph dataset, no Hugging Face dataset "
    "or pretrained model, and no option defaults to or offers another dataset: a layer of any "
    "width the file is likely to give runs over a few thousand rows, microseconds of matrix "
    "work, so the step is kernel launches and message passing, which autocast does not shorten."
)


def trains_on_small_graph(ctx: FileContext) -> bool:
    """The file's data is one of :data:`SMALL_GRAPHS`: a string of the file names one (as
    written, case aside) where it picks the data (a call's argument, ``Planetoid(root, "Cora")``;
    a name's value, ``dataset = "Cora"``; an option's default), not only where it lists what
    may be picked (``assert name in ["Cora", "DBLP"]``), or a loader of one by its class
    (``KarateClub()``, DGL's ``CoraGraphDataset()``); and nothing says the data may be another:
    no other graph dataset is loaded (``PygNodePropPredDataset("ogbn-products")``, ``Reddit``),
    no Hugging Face dataset or pretrained model is (``load_dataset("scientific_papers",
    "pubmed")`` is a text corpus), no dataset option defaults to another (GRACE's ``--dataset``
    defaults to ``DBLP``), and no ``add_argument(..., choices=[...])`` offers, beside one, a
    dataset that is not (``choices=["cora", "ogbn-arxiv"]``)."""
    if not any(name.encode() in ctx.source.lower() for name in SMALL_GRAPHS):
        return False  # most files stop here, without a walk
    named = False
    for node in ctx.of_type(ast.Constant):
        if not (isinstance(node.value, str) and node.value.casefold() in SMALL_GRAPHS):
            continue
        parent = ctx.parents.get(id(node))
        if isinstance(parent, ast.keyword):
            parent = ctx.parents.get(id(parent))
        named = named or isinstance(parent, (ast.Call, ast.Assign, ast.AnnAssign))
    for call, qual in ctx.calls:
        qual = qual or ""
        last = qual.rsplit(".", 1)[-1]
        if qual.startswith(("datasets.", "transformers.")) or (
            isinstance(call.func, ast.Attribute) and call.func.attr == "from_pretrained"
        ):
            return False  # "pubmed" is a text corpus there (``load_dataset("scientific_papers",
            # "pubmed")``), and the model a pretrained transformer
        if qual.startswith(_GRAPH_DATA) and last in _SMALL_GRAPH_CLASSES:
            named = True  # a loader of one small graph, named by its class
        elif (
            qual.startswith(_GRAPH_DATA)
            and last not in _SMALL_GRAPH_LOADERS
            and (qual.startswith(_GRAPH_DATA[0]) or "Dataset" in last)
        ):
            return False  # another graph is picked too (``PygNodePropPredDataset``, ``Reddit``)
    if not named:
        return False
    for option in options(ctx):
        default = option.default
        if (
            _DATASET_OPTION.fullmatch(option.dest.lower())
            and isinstance(default, ast.Constant)
            and isinstance(default.value, str)
            and default.value.casefold() not in SMALL_GRAPHS
        ):
            return False
        offered = {c.casefold() for c in option.choices}
        if offered & SMALL_GRAPHS and offered - SMALL_GRAPHS:
            return False
    return True


# What the rules whose gain grows with a step's tensor work (autocast, cuDNN's autotuner) say
# of the loops of :func:`small_steps` in their docs.
SMALL_STEPS_DOC = (
    "Nor a training loop over small images (torchvision's MNIST, Fashion-MNIST, KMNIST, EMNIST, "
    "QMNIST, CIFAR-10, CIFAR-100 or SVHN, resized to at most 32 pixels a side if at all) at a "
    "batch size the file gives, "
    "whose models the file spells out and do at most two billion multiply-adds a step forward, "
    "counting every convolution at 32x32 pixels (torchvision's MNIST example: 1.3 billion at "
    "batch 64). Its tensor work is a fraction of a millisecond on any GPU that trains."
)

# A million weights: a 784-512-512-10 MLP (0.67 M) does about 43 MFLOP a sample forward and
# backward, microseconds a step on any GPU that trains; its step is launch-bound.
TINY_WEIGHTS = 1_000_000
# A layer whose one side is the data's width (``nn.Linear(x.shape[1], 50)``, a table's columns,
# a graph's node features: the file reads it from the data, never spells it) and whose other
# side is a size the file gives of at most NARROW_WIDTH: it is counted with DATA_WIDTH on the
# data's side. Its work per sample is at most NARROW_WIDTH multiply-adds per input feature: at
# 4,096 features (Cora's 1,433 words, CiteSeer's 3,703, a 32x32 colour image's 3,072) it holds
# 262 k weights. Any other layer with the data's width stays unknown.
NARROW_WIDTH = 64
DATA_WIDTH = 4096
# Convolutions do work in proportion to the image, which the file seldom says: only narrow ones
# (LeNet's 6 and 16, a tutorial's 10) are taken as small at any image size a tutorial uses.
TINY_CONV_CHANNELS = 16
# Images of at most SMALL_IMAGE_SIDE pixels a side (lint.dataloaders), and the forward work a
# training step on them may do and still be small: two billion multiply-adds, about 0.2 ms of
# float32 tensor-core work on a current GPU, the time of its launches. torchvision's MNIST
# example (two convolutions of 32 and 64 channels, batch 64) counts 1.1 billion at 32x32;
# a conv GAN of 64-128 channels on the same images, about 20 billion.
TINY_STEP_MACS = 2_000_000_000

# torch.nn modules without weights, or with a few per channel (norms): they add nothing here.
_LIGHT = frozenset(
    {
        *("ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish"),
        *("Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softplus", "Hardtanh", "Hardswish"),
        *("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "Identity"),
        *("Flatten", "Unflatten", "Upsample", "ZeroPad2d", "ConstantPad2d", "ReflectionPad2d"),
        *("MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d"),
        *("AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool2d"),
        *("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm"),
        *("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm"),
        *("Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"),
        *("MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss"),
    }
)
_RNN_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4, "RNNCell": 1, "GRUCell": 3, "LSTMCell": 4}
_TENSOR_FACTORIES = frozenset(
    {"torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty", "torch.Tensor"}
)

# Graph layers of PyG, DGL and PyG Temporal, each read by its channel sizes (in, out) and, where
# it takes them, its heads and its filter order: name -> (head argument, order argument, default
# order, weight matrices per in x out). A layer's message passing gathers and scatters node and
# edge features, work no weight count sees; with at most NARROW_WIDTH channels a side its matrix
# products are narrow on any graph. Weights count in x out per matrix, (in + out) x out for PyG
# Temporal's recurrent cells, whose hidden state feeds back; GIN and EdgeConv take their MLP as
# an argument, sized with the call.
_GRAPH_LAYERS: dict[str, tuple[str | None, str | None, int, int]] = {
    **dict.fromkeys(
        ("GCNConv", "GraphConv", "SAGEConv", "LEConv", "GeneralConv"), (None, None, 1, 2)
    ),
    **dict.fromkeys(("GATConv", "GATv2Conv", "TransformerConv"), ("heads", None, 1, 4)),
    **dict.fromkeys(("ChebConv", "TAGConv", "SGConv"), (None, "K", 3, 2)),
    **dict.fromkeys(("GINConv", "GINEConv", "EdgeConv", "APPNP", "APPNPConv"), (None, None, 0, 0)),
    **dict.fromkeys(("TGCN", "TGCN2", "A3TGCN", "A3TGCN2"), (None, None, 1, 6)),
    **dict.fromkeys(
        ("DCRNN", "BatchedDCRNN", "GConvGRU", "GCLSTM", "GConvLSTM"), (None, "K", 1, 8)
    ),
}
_GRAPH_LIBRARIES = ("torch_geometric.nn.", "torch_geometric_temporal.nn.", "dgl.nn.")
# DGL's spelling of the same arguments.
_DGL_ARGUMENTS = dict(in_channels="in_feats", out_channels="out_feats", heads="num_heads", K="k")

_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_CONTAINER_PATHS = frozenset(f"torch.nn.{c}" for c in _CONTAINERS)
_REPEATS = (ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)
_BUILTINS = frozenset({"int", "float", "bool", "str", "len", "max", "min", "sum", "round", "abs"})

# Libraries whose callables hold no weights: a metric called in the loop (``acc_fn(y_pred, y)``),
# a progress bar, a logger or a writer the loop reports to.
_WEIGHTLESS_LIBRARIES = (
    *("torchmetrics.", "tqdm.", "wandb.", "tensorboardX.", "logging.", "mlflow.", "neptune."),
    *("numpy.", "time.", "collections.", "visdom.", "matplotlib.", "comet_ml."),
)

Env = dict[str, int | None]
# Parameters already followed through the calls of their function: (id(function), name).
Seen = frozenset[tuple[int, str]]
# Code a training loop runs: its nodes, their function, and whether it is a model's own forward.
Run = tuple[Sequence[ast.AST], ast.AST | None, bool]


# What a loss function is called where a step calls it (``criterion(out, y)``, ``self.loss_fn``):
# built where this file cannot read (another file, a library), it is sized as a loss, no model.
_LOSS_NAME = re.compile(r"loss|loss_?fn|loss_?func(tion)?|(\w+_)?criterion(_\w+)?")


# Base classes that build no weights of their own: a class derived from one builds only what its
# ``__init__`` does. Lightning's module is an ``nn.Module`` with training hooks.
_MODULE_BASES = frozenset(
    {
        "object",
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.module.LightningModule",
        "pytorch_lightning.core.lightning.LightningModule",
    }
)


class _Unknown(Exception):
    """A size or a module this file does not spell out."""


class _DataWidth(int):
    """The width of the data a layer is given, read from it (``x.shape[1]``): counted as
    :data:`DATA_WIDTH` by the one layer kind that may take it (see NARROW_WIDTH)."""


_DATA_ATTRIBUTES = frozenset({"num_features", "num_node_features", "num_edge_features"})
# A dataset's number of classes (``dataset.num_classes``): counted as the data's width where no
# size the file gives says otherwise (``self.num_classes`` bound from a constructor argument,
# ``args.num_classes`` an option's default, are those sizes).
_CLASS_COUNT = "num_classes"
# The classes a dataset or a label encoder lists (``len(train_data.classes)``,
# ``len(le.classes_)``, also through a module-level name bound once to one): their number is
# the data's, as ``num_classes`` is.
_CLASS_LISTS = frozenset({"classes", "classes_", "class_names", "class_to_idx"})


def _reads_data_width(node: ast.expr) -> bool:
    """``x.shape[1]``, ``x.shape[-1]``, ``x.size(1)``, ``dataset.num_features``."""
    if isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
            index = index.operand
        return (
            isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape"
            and isinstance(index, ast.Constant)
            and type(index.value) is int
        )
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "size" and len(node.args) == 1 and not node.keywords
    return isinstance(node, ast.Attribute) and node.attr in _DATA_ATTRIBUTES


def _string_constant_length(ctx: FileContext, node: ast.expr) -> int | None:
    """``len(string.printable)``: the size of a character vocabulary read from Python's own
    ``string`` constants (a character-level RNN's embedding and output layers)."""
    if not (isinstance(node, ast.Call) and dotted(node.func) == "len" and len(node.args) == 1):
        return None
    name = ctx.names.qualname(node.args[0]) or ""
    module, _, attr = name.partition(".")
    if module != "string" or not isinstance(getattr(string, attr, None), str):
        return None
    return len(getattr(string, attr))


class _Sizer:
    """Counts the weights of models built in one file (module docs)."""

    def __init__(
        self,
        ctx: FileContext,
        sizers: dict[int, _Sizer] | None = None,
        area: int | None = None,
        graphs: bool = False,
    ) -> None:
        self.ctx = ctx
        # Whether graph layers are sized (:data:`_GRAPH_LAYERS`): for the tensor work a step
        # does, not for the time its kernels keep the device busy, which the graph sets.
        self.graphs = graphs
        # Given an image's area in pixels, the sizer counts the multiply-adds of one sample's
        # forward instead of weights: a convolution's weights run at every pixel (an upper
        # bound: strides and pooling only shrink the map), a recurrent layer's at every row.
        self.area = area
        # One sizer per file, shared by the sizers of the files a model's classes come from
        # (so a class that builds itself across two files is seen building itself).
        self.sizers = {} if sizers is None else sizers
        self.sizers[id(ctx)] = self
        # The file's classes by name (lint.loops keeps them only for files that train).
        self.classes = {n.name: n for n in ctx.of_type(ast.ClassDef)}
        self._classes: dict[tuple[str, tuple[tuple[str, int | None, bool], ...]], int] = {}
        self._building: set[str] = set()
        self._reading: set[str] = set()  # module-level names being read (``n = n + 1``)
        # ``id`` of what a function of this file returns in a tuple that a caller unpacks: its
        # own name there, not the caller's binding it again (``model, opt = build()``)
        self._handed_back: set[int] = set()

    # Where names are bound, indexed once per file.

    @cached_property
    def assigned(self) -> dict[str, list[ast.expr]]:
        """``target = value`` assignments by target, one per target written (``a = b = f()``
        gives ``a`` and ``b`` the value)."""
        out: dict[str, list[ast.expr]] = defaultdict(list)
        for node in self.ctx.of_type(ast.Assign):
            for t in node.targets:
                name = dotted(t)
                if name is not None:
                    out[name].append(node.value)
        return out

    @cached_property
    def stores(self) -> dict[str, int]:
        """How many nodes bind each target: assignment, loop and ``with`` targets, unpacking,
        augmented assignment."""
        out: dict[str, int] = defaultdict(int)
        for kind in (ast.Name, ast.Attribute):
            for n in self.ctx.of_type(kind):
                name = dotted(n) if isinstance(n.ctx, ast.Store) else None
                if name is not None:
                    out[name] += 1
        return out

    @cached_property
    def _by_scope(self) -> dict[tuple[int, str], tuple[list[ast.expr], list[ast.Name]]]:
        """(``id`` of a scope, plain name) → what that scope's assignments bind the name to, and
        the nodes of the scope that bind it; a function's ``global`` names are the module's."""
        ctx = self.ctx
        declared = {
            (id(ctx.enclosing_scope(n)), name) for n in ctx.of_type(ast.Global) for name in n.names
        }
        out: dict[tuple[int, str], tuple[list[ast.expr], list[ast.Name]]] = {}
        homes: dict[int, tuple[int, str]] = {}  # id(a stored Name) → its key
        for n in ctx.of_type(ast.Name):
            if isinstance(n.ctx, ast.Store):
                scope = id(ctx.enclosing_scope(n))
                key = (id(ctx.tree) if (scope, n.id) in declared else scope, n.id)
                homes[id(n)] = key
                out.setdefault(key, ([], []))[1].append(n)
        for node in ctx.of_type(ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[homes[id(t)]][0].append(node.value)
                elif isinstance(t, ast.Tuple):  # ``data, model, opt = load_objects()``
                    returned = self._returned(node.value, len(t.elts))  # none, or one each
                    for name, value in zip(t.elts, returned, strict=False):
                        if isinstance(name, ast.Name):
                            out[homes[id(name)]][0].append(value)
                            self._handed_back.add(id(value))
        return out

    def _returned(self, value: ast.expr, arity: int) -> list[ast.expr]:
        """The elements of the one tuple a function of this file returns, where ``value``
        calls it by name and it returns a tuple of ``arity`` in a single ``return``."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            return []
        found = self.ctx.loops.functions.get(value.func.id, [])
        if len(found) != 1:
            return []
        returns = [n for n in walk(found[0].body) if isinstance(n, ast.Return)]
        if len(returns) != 1:
            return []
        got = returns[0].value
        return list(got.elts) if isinstance(got, ast.Tuple) and len(got.elts) == arity else []

    def _bound(
        self, name: str, scope: ast.AST | None, at: ast.AST | None = None
    ) -> tuple[list[ast.expr], int]:
        """What binds the plain ``name`` as Python looks it up from ``scope``: the innermost
        enclosing function that binds it, else the module; a function's own ``model = ...``
        or ``for model in models:`` does not stand for the module's ``model``. Used ``at`` a
        node of top-level code (a notebook's training cell, the call that hands the model to
        a training function), a module-level name is what the last plain top-level
        assignment before that node binds, and any binding between them: a notebook's later
        cells that build other models do not stand for the one this cell trains."""
        ctx = self.ctx
        if at is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self._bound_before(name, at)
        while isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = self._by_scope.get((id(scope), name))
            if found is not None:
                return found[0], len(found[1])
            if name in parameter_names(scope):
                return [], 0  # an enclosing function's parameter: what its callers pass
            scope = ctx.enclosing_scope(scope)
        values, stores = self._by_scope.get((id(ctx.tree), name), ([], []))
        return values, len(stores)

    def _bound_before(self, name: str, at: ast.AST) -> tuple[list[ast.expr], int]:
        values, stored = self._by_scope.get((id(self.ctx.tree), name), ([], []))
        line = getattr(at, "lineno", None)
        body = self.ctx.tree.body if isinstance(self.ctx.tree, ast.Module) else []
        plain = [
            stmt
            for stmt in body
            if isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name
            and line is not None
            and stmt.lineno < line
            and not _rebinds(self.ctx, name, stmt.value)
        ]
        if not plain or line is None:
            return values, len(stored)
        start = plain[-1].lineno
        stores = [
            n
            for n in stored
            if start <= n.lineno < line
            and self.ctx.enclosing_scope(n) is self.ctx.tree  # not a function's ``global``
        ]
        kept = [v for v in values if start <= v.lineno < line]
        return kept, len(stores)

    def tensor_type(self, name: str) -> bool:
        """``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``: a module-level name
        bound only to torch's tensor types, called to make tensors, not a module."""
        values = module_bindings(self.ctx, name)
        if not values:
            return False
        kinds = [
            branch
            for v in values
            for branch in ((v.body, v.orelse) if isinstance(v, ast.IfExp) else (v,))
        ]
        paths = [self.ctx.names.qualname(k) or "" for k in kinds]
        return all(p.startswith("torch.") and p.endswith("Tensor") for p in paths)

    @cached_property
    def not_modules(self) -> frozenset[str]:
        """Names a call cannot run a module through: this file's functions and classes, and
        what it imports."""
        facts = self.ctx.loops
        keys = facts.functions.keys() | facts.classes.keys() | self.ctx.names.bindings.keys()
        return frozenset(keys)

    # Sizes.

    def size(self, node: ast.expr | None, env: Env) -> int:
        """``node`` as an int: a literal, a bound argument, ``self.x`` set from one, a module
        constant or option default, or arithmetic of those; anything else is unknown."""
        if node is None:
            raise _Unknown
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if _reads_data_width(node):
            return _DataWidth(DATA_WIDTH)
        if isinstance(node, ast.BinOp) and isinstance(
            node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow)
        ):
            left, right = self.known(node.left, env), self.known(node.right, env)
            if isinstance(node.op, ast.Pow):
                if not 0 <= right <= 8:
                    raise _Unknown
                return int(left**right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if right == 0:
                raise _Unknown
            return left // right
        letters = _string_constant_length(self.ctx, node)
        if letters is not None:
            return letters
        if self._counts_classes(node):
            return _DataWidth(DATA_WIDTH)
        product = self._product(node, env)
        if product is not None:
            return product
        name = dotted(node)
        if name is not None and name in env:
            value = env[name]
            if value is None:
                raise _Unknown
            return value
        value = int_value(self.ctx, node)
        if value is None and isinstance(node, ast.Name) and node.id not in self._reading:
            value = self._module_size(node.id)
        if value is None and isinstance(node, ast.Attribute) and node.attr == _CLASS_COUNT:
            return _DataWidth(DATA_WIDTH)
        if value is None:
            raise _Unknown
        return value

    def _product(self, node: ast.expr, env: Env) -> int | None:
        """``int(np.prod(img_shape))``, ``math.prod(shape)``: the product of a tuple of sizes,
        given or bound once at module level (``img_shape = (opt.channels, opt.img_size,
        opt.img_size)``); None where it is no such product."""
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "int"
            and len(node.args) == 1
        ):
            node = node.args[0]
        if not (
            isinstance(node, ast.Call)
            and (self.ctx.names.qualname(node.func) or "") in ("numpy.prod", "math.prod")
            and len(node.args) == 1
        ):
            return None
        sides = self._bound_once(node.args[0])
        if not isinstance(sides, (ast.Tuple, ast.List)) or not sides.elts:
            raise _Unknown
        return math.prod(self.known(e, env) for e in sides.elts)

    def _bound_once(self, node: ast.expr) -> ast.expr:
        """What a module-level name is bound to, where one plain assignment binds it; anything
        else as it is."""
        if not isinstance(node, ast.Name):
            return node
        values = module_bindings(self.ctx, node.id)
        return values[0] if values is not None and len(values) == 1 else node

    def _counts_classes(self, node: ast.expr) -> bool:
        """``len(x.classes)``, ``len(class_names)``, ``len(species)`` after ``species =
        encoder.classes_`` (module docs, :data:`_CLASS_LISTS`)."""
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "len"
            and len(node.args) == 1
        ):
            return False
        listed = node.args[0]
        if not (isinstance(listed, ast.Name) and listed.id in _CLASS_LISTS):
            listed = self._bound_once(listed)
        last = dotted(listed)
        return last is not None and last.rsplit(".", 1)[-1] in _CLASS_LISTS

    def known(self, node: ast.expr | None, env: Env) -> int:
        """:meth:`size`, where the data's width is unknown."""
        value = self.size(node, env)
        if isinstance(value, _DataWidth):
            raise _Unknown
        return value

    def _module_size(self, name: str) -> int | None:
        """A module-level size bound to arithmetic of literals (``input_size = 28 * 28``), or
        bound again to the same size (a notebook cell run twice), or to other literal sizes (a
        notebook's next cell trying ``encoding_dim = 32`` after 64): the largest, which bounds
        every model built with it."""
        values = module_bindings(self.ctx, name)
        if values is None:
            return None
        self._reading.add(name)
        try:
            sizes = [self._size_or_none(v, {}) for v in values]
        finally:
            self._reading.discard(name)
        if None in sizes or len({(v, isinstance(v, _DataWidth)) for v in sizes}) != 1:
            if len(sizes) > 1 and all(type(v) is int for v in sizes):
                return max(sizes)  # type: ignore[type-var]
            return None
        return sizes[0]

    def _size_or_none(self, node: ast.expr | None, env: Env) -> int | None:
        try:
            return self.size(node, env)
        except _Unknown:
            return None

    def _kernel(self, node: ast.expr | None, env: Env, dims: int) -> int:
        if isinstance(node, (ast.Tuple, ast.List)):
            return math.prod(self.known(e, env) for e in node.elts)
        return int(self.known(node, env) ** dims)

    # Layers.

    def layer(self, call: ast.Call, kind: str, env: Env) -> int:
        """Weights of one ``torch.nn.<kind>(...)``."""
        if kind in _LIGHT or kind.endswith("Loss"):
            return 0
        arg = lambda name, pos: argument(call, name, pos)  # noqa: E731
        if kind == "Linear":
            sides = self.size(arg("in_features", 0), env), self.size(arg("out_features", 1), env)
            given = [s for s in sides if not isinstance(s, _DataWidth)]
            if len(given) < 2 and (not given or given[0] > NARROW_WIDTH):
                raise _Unknown  # the data's width on both sides, or beside a wide side
            return sides[0] * sides[1]
        size = self.known  # below, a layer with the data's width is unknown
        if kind in ("Embedding", "EmbeddingBag"):
            # a lookup reads one row a token: the table's size (often the vocabulary's, read
            # from the data) is not a step's work
            return size(arg("embedding_dim", 1), env)
        if kind.startswith(("Conv", "ConvTranspose")) and kind[-2:] in ("1d", "2d", "3d"):
            c_in = size(arg("in_channels", 0), env)
            c_out = size(arg("out_channels", 1), env)
            if self.area is None and max(c_in, c_out) > TINY_CONV_CHANNELS:
                raise _Unknown  # wide enough that the image size, unread here, decides
            groups = self._default(arg("groups", 6), env, 1)
            kernel = self._kernel(arg("kernel_size", 2), env, int(kind[-2]))
            return c_in // max(groups, 1) * c_out * kernel * (self.area or 1)
        if kind in _RNN_GATES:
            inputs = size(arg("input_size", 0), env)
            hidden = size(arg("hidden_size", 1), env)
            layers = 1 if kind.endswith("Cell") else self._default(arg("num_layers", 2), env, 1)
            bidirectional = argument(call, "bidirectional", 7)
            directions = 2 if isinstance(bidirectional, ast.Constant) and bidirectional.value else 1
            if bidirectional is not None and not isinstance(bidirectional, ast.Constant):
                raise _Unknown
            per_layer = _RNN_GATES[kind] * (inputs + hidden) * hidden
            deeper = _RNN_GATES[kind] * (hidden * directions + hidden) * hidden
            steps = 1 if self.area is None else math.isqrt(self.area)
            return directions * (per_layer + (layers - 1) * deeper) * steps
        if kind == "MultiheadAttention" and self.area is None:
            return 4 * size(arg("embed_dim", 0), env) ** 2
        raise _Unknown  # a Transformer's defaults, or a layer not in this table

    def graph_layer(self, call: ast.Call, path: str, env: Env) -> int:
        """Weights of one graph layer of :data:`_GRAPH_LAYERS`, at most NARROW_WIDTH channels
        a side (the data's width allowed on one side): a wider one is unknown, its work set by
        the graph's size, which the file does not give."""
        if not self.graphs:
            raise _Unknown
        heads, order, default_order, matrices = _GRAPH_LAYERS[path.rpartition(".")[2]]
        dgl, recurrent = path.startswith("dgl."), path.startswith("torch_geometric_temporal.")
        if not matrices:
            # APPNP has no weights; GIN's and EdgeConv's MLP, an argument, is sized with the
            # call, and held to the same width here: a 300-wide GIN (ogb's) is no narrow net.
            for handed in (*call.args, *(k.value for k in call.keywords)):
                self._narrow_mlp(handed, env)
            return 0

        def arg(name: str, pos: int) -> ast.expr | None:
            return argument(call, _DGL_ARGUMENTS.get(name, name) if dgl else name, pos)

        c_in, c_out = self._narrow(arg("in_channels", 0), arg("out_channels", 1), env)
        if recurrent and isinstance(c_out, _DataWidth):
            raise _Unknown  # a recurrent cell's hidden state as wide as the data
        factor = matrices
        for name, default in ((heads, 1), (order, default_order)):
            if name is not None:
                value = self._default(arg(name, 2), env, default)
                if not 0 < value <= NARROW_WIDTH:
                    raise _Unknown
                factor *= value
        return (c_in + c_out * recurrent) * c_out * factor

    def _narrow_mlp(self, given: ast.expr, env: Env) -> None:
        """``given``, handed to a graph layer, builds only linear layers of at most
        NARROW_WIDTH units a side (the data's width allowed on one): else unknown."""
        if isinstance(given, ast.Constant):
            return  # ``train_eps=True``, ``aggr="max"``
        calls = [n for n in subtree(given) if isinstance(n, ast.Call)]
        if not calls:
            raise _Unknown  # an MLP built elsewhere, under a name
        for call in calls:
            if self.ctx.names.qualname(call.func) == "torch.nn.Linear":
                self._narrow(
                    argument(call, "in_features", 0), argument(call, "out_features", 1), env
                )

    def _narrow(self, first: ast.expr | None, second: ast.expr | None, env: Env) -> tuple[int, int]:
        """Two sides of a layer, each at most NARROW_WIDTH, or one of them the data's width:
        else unknown (the data's width on both sides, or a wide layer)."""
        sides = self.size(first, env), self.size(second, env)
        given = [s for s in sides if not isinstance(s, _DataWidth)]
        if not given or max(given) > NARROW_WIDTH:
            raise _Unknown
        return sides

    def _default(self, node: ast.expr | None, env: Env, default: int) -> int:
        return default if node is None else self.known(node, env)

    def _parameter(self, call: ast.Call, env: Env) -> int:
        data = call.args[0] if call.args else None
        if not isinstance(data, ast.Call) or self.ctx.names.qualname(data.func) not in (
            _TENSOR_FACTORIES
        ):
            raise _Unknown
        if len(data.args) == 1 and isinstance(data.args[0], (ast.Tuple, ast.List)):
            dims = data.args[0].elts
        else:
            dims = list(data.args)
        return math.prod(self.known(d, env) for d in dims)

    # Expressions and classes.

    def built(self, node: ast.AST, env: Env, owner: str | None = None) -> int:
        """Weights of every module built under ``node``: ``torch.nn`` layers, ``nn.Parameter``,
        and classes of this file. Any other call whose value becomes a module attribute or a
        container's element is a module this file does not spell out."""
        total = 0
        repeated: set[int] = set()  # built in a comprehension or a loop: how often, unread
        for n in subtree(node):
            if isinstance(n, (*_REPEATS, *LOOPS)) and n is not node:
                repeated |= {id(m) for m in subtree(n) if m is not n}
        # ``def block(in_feat, out_feat): return [nn.Linear(in_feat, out_feat), ...]`` inside a
        # method: its layers are sized where it is called, with the sizes each call gives.
        helpers = _nested_helpers(node)
        inside = {id(m) for f in helpers.values() for m in subtree(f) if m is not f}
        for call in (n for n in subtree(node) if isinstance(n, ast.Call)):
            if id(call) in inside:
                continue
            name = self.ctx.names.qualname(call.func) or ""
            local = call.func.id if isinstance(call.func, ast.Name) else None
            if local is not None and local in helpers:
                total += self._helper(helpers[local], call, env)
                continue
            if name in PARAMETERS:
                weights = self._parameter(call, env)
            elif _is_nn(name):
                weights = self.layer(call, name[9:], env)
                if name[9:] in _CONTAINERS:
                    weights += self._named_layers(call, node, helpers)
            elif _graph_layer(name):
                weights = self.graph_layer(call, name, env)
            elif local is not None and local in self.classes and local != owner:
                weights = self.of_class(local, self._bind(local, call, env))
            elif self._is_module_slot(call):
                found = self._project_class(call, env)
                if found is None:
                    raise _Unknown
                weights = found
            else:
                weights = 0
            if weights and id(call) in repeated:
                raise _Unknown
            total += weights
        return total

    def _named_layers(
        self, container: ast.Call, node: ast.AST, helpers: dict[str, Function]
    ) -> int:
        """Weights of a container's arguments that are names of layers built before it
        (``linear1 = nn.Linear(784, 256)``, then ``nn.Sequential(linear1, relu, linear2)``):
        each name bound once, to a ``torch.nn`` or graph layer, outside ``node`` (inside, the
        walk counts it already); a name used twice shares its weights. Any other argument that
        is not spelled out where it is given (``nn.Sequential(*layers)``) is built elsewhere."""
        total = 0
        counted: set[str] = set()
        scope = self.ctx.enclosing_scope(container)
        inside = {id(m) for m in subtree(node)}
        for arg in container.args:
            if isinstance(arg, (ast.Call, ast.List, ast.Tuple, ast.IfExp)) or _calls_helper(
                arg, helpers
            ):
                continue
            if not isinstance(arg, ast.Name):
                raise _Unknown  # ``nn.Sequential(*layers)``: built elsewhere
            values, stores = self._bound(arg.id, scope, container)
            if len(values) != 1 or stores != 1 or not isinstance(values[0], ast.Call):
                raise _Unknown
            layer = values[0]
            path = self.ctx.names.qualname(layer.func) or ""
            if not (_is_nn(path) or _graph_layer(path)):
                raise _Unknown  # a model of its own, or a layer from a library
            if id(layer) in inside or arg.id in counted:
                continue
            counted.add(arg.id)
            total += self.built(layer, {})
        return total

    def _helper(self, helper: Function, call: ast.Call, env: Env) -> int:
        """The layers a nested helper builds for one call of it, sized with what it is given."""
        params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
        bound: Env = {}
        for i, p in enumerate(params):
            given = call.args[i] if i < len(call.args) else None
            given = next((k.value for k in call.keywords if k.arg == p), given)
            if isinstance(given, ast.Starred):
                raise _Unknown
            bound[p] = self._size_or_none(given, env) if given is not None else None
        return self.built(helper, {**env, **bound})

    def _is_module_slot(self, call: ast.Call) -> bool:
        """``call``'s value is stored on ``self`` or handed to a torch.nn container: there it
        can only be a module (or a tensor, which a factory of torch makes: those are counted)."""
        parent = self.ctx.parents.get(id(call))
        if isinstance(call.func, ast.Name) and call.func.id in _BUILTINS:
            return False
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if any((dotted(t) or "").startswith("self.") for t in targets):
                name = self.ctx.names.qualname(call.func) or ""
                return not name.startswith("torch.") or name.startswith("torch.nn.")
            return False
        if isinstance(parent, (ast.List, ast.Tuple)):
            parent = self.ctx.parents.get(id(parent))
        if isinstance(parent, ast.Call):
            name = self.ctx.names.qualname(parent.func) or ""
            return name in _CONTAINER_PATHS
        return False

    def _init(self, cls: str) -> Function | None:
        return constructor(self.classes[cls])

    def _bind(self, cls: str, call: ast.Call, env: Env, callee: _Sizer | None = None) -> Env:
        """The class's ``__init__`` parameters as sizes: from the call (read in this file),
        else their defaults (read in the file of the class, ``callee``'s)."""
        callee = self if callee is None else callee
        init = callee._init(cls)
        if init is None:
            return {}
        params = [*init.args.posonlyargs, *init.args.args][1:]  # self
        defaults = init.args.defaults
        bound: Env = {}

        value = self._size_or_none
        first_default = len(params) - len(defaults)
        for i, p in enumerate(params):
            passed = call.args[i] if i < len(call.args) else None
            given = next((k.value for k in call.keywords if k.arg == p.arg), passed)
            if isinstance(given, ast.Starred):
                return {p.arg: None for p in params}
            if given is not None:
                bound[p.arg] = value(given, env)
            elif i >= first_default:
                bound[p.arg] = callee._size_or_none(defaults[i - first_default], {})
            else:
                bound[p.arg] = None
        for p, d in zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True):
            given = next((k.value for k in call.keywords if k.arg == p.arg), None)
            if given is not None:
                bound[p.arg] = value(given, env)
            else:
                bound[p.arg] = callee._size_or_none(d, {})
        return bound

    def _project_class(self, call: ast.Call, env: Env) -> int | None:
        """Weights of the class ``call`` builds where another file of the project defines it
        (``from model import Net``), sized in that file with the sizes this call passes; 0 for
        a class that is no module (``Logger()``); None where the call builds no class of the
        project's."""
        from torchpace.lint.project import definition_of, plain_class

        found = definition_of(self.ctx, call, ast.ClassDef)
        if found is None:
            return None
        where, cls = found
        if plain_class(where, cls):
            return 0
        if where is self.ctx:
            return None  # this file's own class, where it is not a top-level one: unread
        other = self.sizers.get(id(where)) or _Sizer(where, self.sizers, self.area, self.graphs)
        if cls.name not in other.classes:
            raise _Unknown
        return other.of_class(cls.name, self._bind(cls.name, call, env, callee=other))

    def of_class(self, cls: str, env: Env) -> int:
        # A width read from the data is not the same size as a literal of its value.
        key = (cls, tuple(sorted((k, v, isinstance(v, _DataWidth)) for k, v in env.items())))
        if key in self._classes:
            return self._classes[key]
        if cls in self._building:
            raise _Unknown  # a class that builds itself
        self._building.add(cls)
        try:
            node = self.classes[cls]
            if self._plain(node):
                self._classes[key] = 0
                return 0  # a logger, a meter: no module
            init = self._init(cls)
            scope = dict(env)
            if init is not None:  # ``self.hidden = hidden``: sizes read back as ``self.hidden``
                for stmt in walk(init.body):
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                        target = dotted(stmt.targets[0]) or ""
                        if target.startswith("self.") and not isinstance(stmt.value, ast.Call):
                            scope[target] = self._size_or_none(stmt.value, scope)
                            if (
                                scope[target] is None
                                and _runs(node, target)
                                and not self._handed_weightless(init, stmt.value)
                            ):
                                raise _Unknown  # ``self.backbone = backbone``: a model handed in
            if any(self._foreign_base(b) for b in node.bases):
                raise _Unknown
            weights = self.built(node, scope, owner=cls)
        finally:
            self._building.discard(cls)
        self._classes[key] = weights
        return weights

    def _handed_weightless(self, init: Function, value: ast.expr) -> bool:
        """``value`` is a parameter of ``init`` that its default and every call of the class
        give a torch function (``F.relu``, ``torch.tanh``) or a weightless ``torch.nn`` layer
        (``nn.ReLU()``)."""
        if not isinstance(value, ast.Name):
            return False
        params = [*init.args.posonlyargs, *init.args.args]
        names = [a.arg for a in params]
        if value.id not in names:
            return False
        default = parameter_defaults(init).get(value.id)
        given = [default if g is None else g for g in self._constructed_with(init, value.id)]
        if not given:
            return False

        def weightless(v: ast.expr | None) -> bool:
            if v is None:
                return False
            if isinstance(v, ast.Call):
                name = self.ctx.names.qualname(v.func) or ""
                last = name.rsplit(".", 1)[-1]
                return _is_nn(name) and last in _LIGHT and last not in _CONTAINERS
            name = self.ctx.names.qualname(v) or ""
            last = name.rsplit(".", 1)[-1]
            return name.startswith("torch.") and last[:1].islower()

        return all(weightless(g) for g in given)

    def _plain(self, node: ast.ClassDef) -> bool:
        from torchpace.lint.project import plain_class

        return plain_class(self.ctx, node)

    def _foreign_base(self, base: ast.expr) -> bool:
        """A base class other than ``nn.Module`` (or ``object``) builds modules unread here."""
        name = self.ctx.names.qualname(base) or dotted(base) or ""
        if name in _MODULE_BASES:
            return False
        return not (isinstance(base, ast.Name) and base.id in self.classes)

    # Models.

    def model(
        self, target: str, scope: ast.AST | None, seen: Seen, at: ast.AST | None = None
    ) -> int:
        """Weights of the model ``target`` names where it is called (module docs). ``seen``:
        the parameters already followed, each with its function (``train(model)`` handing its
        ``model`` on to ``train_step(model)`` is two parameters, not a cycle). ``at``: a node
        of top-level code that uses the name, where only the bindings before it count."""
        if target in parameter_names(scope):  # the function's own name for what it is given
            key = (id(scope), target)
            if key in seen:
                raise _Unknown  # a function that hands its parameter back to itself
            return self._through_parameter(target, scope, seen | {key})  # type: ignore[arg-type]
        if "." in target:
            values, stores = self.assigned.get(target, []), self.stores.get(target, 0)
        else:
            values, stores = self._bound(target, scope, at)
        if not values or len(values) != stores:
            raise _Unknown  # also bound by unpacking, a loop, ``with``: not read here
        total = 0
        for value in values:
            if id(value) not in self._handed_back and _rebinds(self.ctx, target, value):
                continue  # ``model = model.to(device)``, ``model = DDP(model)``: the same model
            value = strip_moves(value)
            if isinstance(value, ast.Call):
                value = wrapped(self.ctx.names, value) or value  # ``self.model = DDP(model)``
            if isinstance(value, ast.Name):
                # ``self.model = model`` in ``__init__`` (what its callers build), ``net =
                # model``, or the element a function of this file returns in its tuple
                key = (id(value), value.id)  # this name read here: ``a = b; b = a`` ends
                if key in seen:
                    raise _Unknown
                where = self.ctx.enclosing_scope(value)
                total = max(total, self.model(value.id, where, seen | {key}))
                continue
            if not isinstance(value, ast.Call):
                raise _Unknown
            name = self.ctx.names.qualname(value.func) or ""
            local = value.func.id if isinstance(value.func, ast.Name) else None
            if local is not None and local in self.classes:
                weights = self.of_class(local, self._bind(local, value, {}))
            elif _is_nn(name) or _graph_layer(name):
                weights = self.built(value, {})  # the call itself and what it is given
            elif name.startswith(_WEIGHTLESS_LIBRARIES):
                weights = 0  # a metric, a logger: no weights, nothing to compute at scale
            else:
                found = self._project_class(value, {})
                if found is None:
                    raise _Unknown
                weights = found
            total = max(total, weights)
        return total

    def _constructed_with(self, init: Function, name: str) -> list[ast.expr | None]:
        """What each call of this file that builds the class ``init`` belongs to passes for
        its parameter ``name`` (``Trainer(model, loader)`` for ``def __init__(self, model,
        ...)``)."""
        params = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
        parent = next(iter(self.ctx.ancestors(init)), None)
        if init.name != "__init__" or not isinstance(parent, ast.ClassDef) or name not in params:
            return []
        position = params.index(name)
        return [
            argument(call, name, position)
            for call, _ in self.ctx.calls
            if isinstance(call.func, ast.Name) and call.func.id == parent.name
        ]

    def _through_parameter(self, target: str, scope: Function, seen: Seen) -> int:
        given = passed_for(self.ctx, scope, target) or self._constructed_with(scope, target)
        if not given:
            raise _Unknown  # keyword-only, or never called here
        total = 0
        for passed in given:
            name = dotted(passed) if passed is not None else None
            if passed is None or name is None:
                raise _Unknown
            total = max(total, self.model(name, self.ctx.enclosing_scope(passed), seen, at=passed))
        return total


def model_weights(
    ctx: FileContext, target: str, scope: ast.AST | None = None, graphs: bool = False
) -> int | None:
    """The weights of the model ``target`` names, where this file spells it out; else None.
    With ``graphs``, a narrow graph net counts as small (:func:`launch_bound`)."""
    try:
        return _Sizer(ctx, graphs=graphs).model(target, scope, frozenset())
    except _Unknown:
        return None


def launch_bound(ctx: FileContext, graphs: bool = False) -> frozenset[int]:
    """``id`` of every node of a training loop whose models are all known and small (module
    docs), and of the functions of this file that loop calls. With ``graphs``, graph nets of
    at most NARROW_WIDTH channels a layer count as small too (:data:`_GRAPH_LAYERS`): their
    step does little tensor work for autocast to speed up, though its gathers over a large
    graph may keep the device busy, so a sync there still costs the step its overlap."""
    facts = ctx.loops
    if not facts.step_loops and not facts.step_functions:
        return frozenset()
    sizer = _Sizer(ctx, graphs=graphs)
    out: set[int] = set()
    for loop in facts.training_loops():
        runs = step_runs(ctx, loop)
        weights = _sizes(sizer, runs)
        if weights is None or sum(weights) > TINY_WEIGHTS:
            continue
        out |= {id(n) for run, _, _ in runs for n in run}
        out.add(id(loop))
    return frozenset(out)


def step_runs(ctx: FileContext, loop: Step) -> list[Run]:
    """The code a training loop runs: its body, and the bodies of the functions it calls."""
    facts = ctx.loops
    scope = facts.scope_of[id(loop)]
    nodes = list(walk(loop.body))
    runs: list[Run] = [(nodes, scope, False)]
    for call in (n for n in nodes if isinstance(n, ast.Call)):
        # ``model(x)`` on an instance of a class of this file (or of one of several, a
        # notebook's cells building each in turn) runs its forward, whose ``self.x`` are the
        # submodules that sizing ``model`` already counts.
        name = dotted(call.func) or ""
        called = facts.instances.get(name) in facts.classes or name in facts.alternatives
        runs += [(list(walk(fn.body)), fn, called) for fn in facts.callees(call, scope)]  # type: ignore[arg-type]
    return runs


def small_steps(ctx: FileContext) -> frozenset[int]:
    """``id`` of each training loop over small images (a dataset of images of at most 32x32
    pixels, resized, if at all, to at most 32 pixels a side;
    :func:`~torchpace.lint.dataloaders.yields_small_images`)
    at a batch size the file gives, whose models this file spells out and do at most
    :data:`TINY_STEP_MACS` multiply-adds a step forward, counted at 32x32 pixels for every
    convolution (an upper bound). Such a step's tensor work is a fraction of a millisecond on
    any GPU that trains: casting it to 16 bits or autotuning its convolutions cannot pay."""
    from torchpace.lint.dataloaders import (
        SMALL_IMAGE_SIDE,
        batch_size,
        iterated_loader_calls,
        yields_small_images,
    )

    out: set[int] = set()
    sizer = _Sizer(ctx, area=SMALL_IMAGE_SIDE**2)
    for loop in ctx.loops.training_loops():
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        loaders = iterated_loader_calls(ctx, loop)
        if not loaders or not all(yields_small_images(ctx, c) for c in loaders):
            continue
        batches = [batch_size(ctx, c) for c in loaders]
        work = _sizes(sizer, step_runs(ctx, loop))
        if work is None or None in batches:
            continue
        if sum(work) * max(b for b in batches if b is not None) <= TINY_STEP_MACS:
            out.add(id(loop))
    return frozenset(out)


def _runs(cls: ast.ClassDef, target: str) -> bool:
    """A method of ``cls`` calls ``target`` (``self.backbone(x)``) or a method of it, or loops
    over it (``for m in self.models:``): what it holds is a module, not a size."""
    for n in subtree(cls):
        called = dotted(n.func) if isinstance(n, ast.Call) else None
        if called is not None and (called == target or called.startswith(f"{target}.")):
            return True  # also a method of it: timm's ``self.backbone.forward_features(x)``
        if isinstance(n, (ast.For, ast.comprehension)) and dotted(n.iter) == target:
            return True
    return False


def _callables(
    sizer: _Sizer, nodes: Sequence[ast.AST], scope: ast.AST | None, in_model: bool = False
) -> set[str]:
    """What ``nodes`` call that could be a module, to be sized: a name that is not a function
    or class of this file, an import or a builtin; ``self.x`` where the file binds it (not in a
    model's own forward, ``in_model``: its submodules are sized with the model); and the
    object a method or submodule is called on, where the file builds it (not what torch builds
    for other ends: ``opt.step()``, ``scaler.update()``)."""
    facts = sizer.ctx.loops
    params = parameter_names(scope)
    out = set()
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            name = func.id
            if name not in sizer.not_modules and not (
                (hasattr(builtins, name) and name not in params) or sizer.tensor_type(name)
            ):
                out.add(name)  # a module, a loss, or a callable this file cannot tell: sized
        elif isinstance(func, ast.Attribute) and dotted(func.value) == "self":
            target = f"self.{func.attr}"
            if not in_model and sizer.stores.get(target):
                out.add(target)
        elif isinstance(func, ast.Attribute):
            # A method or a submodule of an object the file builds (``teacher.backbone(x)``,
            # ``ema.update()``): that object is sized too, unless torch made it for something
            # other than a model (an optimizer, a scaler, a writer: ``opt.step()``).
            root = (dotted(func.value) or "").split(".")[0]
            owner = facts.instances.get(root, "")
            if root and owner and not (owner.startswith("torch.") and not _is_nn(owner)):
                out.add(root)
    return out


def _nested_helpers(node: ast.AST) -> dict[str, Function]:
    """The functions defined inside the methods of the class ``node`` (or inside ``node``, a
    function), by name."""
    bodies = node.body if isinstance(node, ast.ClassDef) else [node]
    return {
        n.name: n
        for method in bodies
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in subtree(method)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not method
    }


def _calls_helper(arg: ast.expr, helpers: dict[str, Function]) -> bool:
    """``*block(128, 256)``: the layers a nested helper returns, spread into a container."""
    value = arg.value if isinstance(arg, ast.Starred) else arg
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in helpers
    )


def _graph_layer(path: str) -> bool:
    """A graph layer of :data:`_GRAPH_LAYERS` (``torch_geometric.nn.GCNConv``,
    ``dgl.nn.pytorch.conv.GATConv``)."""
    return path.rpartition(".")[2] in _GRAPH_LAYERS and path.startswith(_GRAPH_LIBRARIES)


def _is_nn(path: str) -> bool:
    """``torch.nn.Linear``, not ``torch.nn.functional.relu`` nor ``torch.nn.init``."""
    return path.startswith("torch.nn.") and path.count(".") == 2 and path[9:10].isupper()


def _rebinds(ctx: FileContext, name: str, value: ast.expr) -> bool:
    """``model = model.to(device)``, ``model = DDP(model)``: the same model, bound again."""
    value = strip_moves(value)
    return dotted(value) == name or (
        isinstance(value, ast.Call) and rewraps(ctx.names, name, value)
    )


def _sizes(sizer: _Sizer, runs: Sequence[Run]) -> list[int] | None:
    """The size of every module the code runs, where each is known and one has weights."""
    sizes = []
    try:
        for nodes, scope, in_model in runs:
            at = nodes[0] if nodes and isinstance(scope, ast.Module) else None
            for target in _callables(sizer, nodes, scope, in_model):
                try:
                    sizes.append(sizer.model(target, scope, frozenset(), at=at))
                except _Unknown:
                    if not _LOSS_NAME.fullmatch(target.rpartition(".")[2]):
                        raise
                    sizes.append(0)  # a loss built where the file cannot see: no model
    except _Unknown:
        return None
    return sizes if sizes and max(sizes) > 0 else None


__all__ = [
    "GRAPH_MODELS_DOC",
    "SMALL_GRAPHS",
    "SMALL_GRAPH_DOC",
    "SMALL_STEPS_DOC",
    "TINY_CONV_CHANNELS",
    "TINY_STEP_MACS",
    "TINY_WEIGHTS",
    "launch_bound",
    "model_weights",
    "small_steps",
    "step_runs",
    "trains_on_small_graph",
]
