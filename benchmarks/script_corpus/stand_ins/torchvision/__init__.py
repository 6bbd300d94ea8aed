"""A stand-in for the small slice of torchvision that two corpus scripts use.

Why it exists: the corpus runs public training scripts byte for byte as upstream wrote them, and
two of them (pytorch/examples ``mnist_hogwild/main.py`` and ``vae/main.py``) import torchvision.
torchvision does not import beside the CPU torch wheel this project is measured with, and it must
not become a dependency of the project.  So the scripts stay unmodified and only the library they
import is stood in for: ``corpus.json`` puts ``benchmarks/script_corpus/stand_ins`` in front of
PYTHONPATH for those two entries, and ``import torchvision`` finds this package.

It is our own code, written from the documented behaviour (plain Python, numpy and torch), and it
covers only what the corpus uses:

- ``torchvision.datasets.MNIST(root, train=True, transform=None, target_transform=None,
  download=False)``: reads the four uncompressed IDX files from ``root/MNIST/raw/`` (made by
  ``make_corpus.py``); never downloads anything.
- ``torchvision.transforms.Compose``, ``ToTensor``, ``Normalize``.
- ``torchvision.utils.save_image(tensor, fp, nrow=8, padding=2, pad_value=0.0)``: writes the
  image grid as an 8-bit RGB PNG (standard library ``zlib``; no PIL).

Where it differs from torchvision: a dataset sample's image is a 28x28 ``uint8`` numpy array, not
a PIL Image (``ToTensor`` turns either into the same float32 1x28x28 tensor in [0, 1]); anything
outside the list above is absent and fails loudly rather than approximately.
"""

from . import datasets, transforms, utils

__version__ = "0.0.0+corpus.stand.in"

__all__ = ["__version__", "datasets", "transforms", "utils"]
