"""torchpace.measure.compat: each branch of what differs between torch versions."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
import torch

from torchpace.measure import compat
from torchpace.speedups.fast_math import set_fast_math

NEW_API = compat.has_fp32_precision_api()
needs_new_api = pytest.mark.skipif(
    not NEW_API, reason=f"torch {torch.__version__}: no fp32_precision"
)


_backend = compat._backend  # the real reader, also while a test replaces compat's
_PATHS = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")


@pytest.fixture(autouse=True)
def _restore_precision() -> Iterator[None]:
    """Every test leaves the process-wide math settings as it found them."""
    before = {p: compat._read(lambda p=p: _backend(p).fp32_precision) for p in _PATHS}
    legacy = compat.float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(legacy)
    for path, value in before.items():
        if value is not None:
            _backend(path).fp32_precision = value


def test_the_legacy_settings_are_read_as_they_were_set() -> None:
    torch.set_float32_matmul_precision("high")
    assert compat.float32_matmul_precision() == "high"
    assert compat.tf32_matmul() is True
    torch.set_float32_matmul_precision("highest")
    assert compat.float32_matmul_precision() == "highest"
    assert compat.tf32_matmul() is False


@needs_new_api
def test_after_the_new_api_the_legacy_getters_raise_and_compat_still_reads() -> None:
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    with pytest.raises(RuntimeError):
        torch.get_float32_matmul_precision()
    with pytest.raises(RuntimeError):
        _ = torch.backends.cuda.matmul.allow_tf32
    assert compat.tf32_matmul() is True
    assert compat.float32_matmul_precision() == "high"
    torch.backends.cudnn.conv.fp32_precision = "ieee"  # conv and rnn now disagree: legacy raises
    assert compat.tf32_cudnn() is False


@needs_new_api
def test_bf16_through_the_new_cpu_api_reads_as_medium() -> None:
    torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    assert compat.float32_matmul_precision() == "medium"


@needs_new_api
def test_set_fast_math_and_its_restore_work_after_the_new_api() -> None:
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    fast = set_fast_math("cpu", matmul_precision="medium")
    assert compat.float32_matmul_precision() == "medium"
    fast.restore()
    assert compat.float32_matmul_precision() == "high"  # what the script had set


def test_without_the_new_api_compat_reads_the_legacy_getters(monkeypatch) -> None:
    # torch < 2.9: no fp32_precision attributes at all
    def absent(path: str) -> object:
        raise AttributeError(path)

    monkeypatch.setattr(compat, "_backend", absent)
    torch.set_float32_matmul_precision("high")
    assert compat.float32_matmul_precision() == "high"
    assert compat.tf32_matmul() is True
    assert compat.tf32_cudnn() is bool(torch.backends.cudnn.allow_tf32)


def test_an_unknown_precision_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="highest, high or medium"):
        compat.set_float32_matmul_precision("tf32")


def test_attention_backends_by_name() -> None:
    q = torch.randn(1, 2, 4, 8)
    with compat.sdpa_kernel("math"):
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    assert out.shape == q.shape
    with pytest.raises(ValueError, match=r"choose one of .*math"):
        compat.sdpa_kernel("nonsense")


def test_dynamo_support_is_read_where_torch_keeps_it(monkeypatch) -> None:
    from torch._dynamo.eval_frame import is_dynamo_supported

    assert compat.dynamo_supported() is bool(is_dynamo_supported())
    # a version that moved it: compile itself is left to say why it cannot run
    monkeypatch.setitem(sys.modules, "torch._dynamo.eval_frame", None)
    assert compat.dynamo_supported() is True


def test_bf16_on_cuda_counts_native_support_only(monkeypatch) -> None:
    # A pre-Ampere card (7.0) emulates bf16; torch.cuda.is_bf16_supported() says True there.
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (7, 0))
    assert compat.bf16_native_cuda(torch.device("cuda", 0)) is False
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    assert compat.bf16_native_cuda(torch.device("cuda", 0)) is True
