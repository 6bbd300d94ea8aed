"""The technique catalogue: complete entries, stable ids, guides cited, docs up to date."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from torchpace import catalog
from torchpace.catalog import GUIDES, TECHNIQUES, Family, Technique
from torchpace.catalog_docs import NOT_MEASURED, render_markdown

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "techniques.md"
KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")

# Ids other code stores in plans, results and rule metadata: removing or renaming one breaks them.
REQUIRED_IDS = (
    "loader-workers",
    "pinned-memory",
    "async-prefetch",
    "fast-input-format",
    "persistent-workers",
    "max-batch-size",
    "fixed-shapes",
    "length-bucketing",
    "amp-fp16",
    "amp-bf16",
    "tf32",
    "adamw",
    "fused-optimizer",
    "cudnn-benchmark",
    "avoid-syncs",
    "create-on-device",
    "torch-compile",
    "no-grad-eval",
    "conv-bias-before-bn",
    "grad-set-to-none",
    "channels-last",
    "activation-checkpointing",
    "disable-debug-apis",
    "sizes-multiple-of-8",
    "avoid-empty-cache",
    "ddp-not-dp",
    "ddp-no-sync",
    "ddp-unused-params",
    "rank-load-balance",
    "lr-schedule",
)

TEXT_FIELDS = ("id", "title", "family", "mechanism", "helps_when", "hurts_when", "how")


def test_ids_are_unique_and_kebab_case() -> None:
    ids = catalog.ids()
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"duplicate technique ids: {duplicates}"
    bad = [i for i in ids if not KEBAB.fullmatch(i)]
    assert not bad, f"ids must be kebab-case: {bad}"


@pytest.mark.parametrize("technique", TECHNIQUES, ids=lambda t: t.id)
def test_entry_is_complete(technique: Technique) -> None:
    for name in TEXT_FIELDS:
        value = getattr(technique, name)
        assert isinstance(value, str) and value.strip(), f"{technique.id}: {name} is empty"
    assert isinstance(technique.measured, str)  # "" until measured on named hardware
    assert isinstance(technique.changes_numerics, bool)
    assert technique.family in get_args(Family), f"{technique.id}: family {technique.family!r}"
    assert technique.devices, f"{technique.id}: no devices"
    assert set(technique.devices) <= {"cpu", "cuda"}, f"{technique.id}: {technique.devices}"
    assert len(set(technique.devices)) == len(technique.devices)
    # A technique no guide covers is allowed only when this project measured it (its source).
    assert technique.guides or technique.measured, f"{technique.id}: cites no guide or measurement"
    unknown = set(technique.guides) - set(GUIDES)
    assert not unknown, f"{technique.id}: unknown guide keys {sorted(unknown)}"
    assert len(set(technique.guides)) == len(technique.guides)


@pytest.mark.parametrize("technique", TECHNIQUES, ids=lambda t: t.id)
def test_how_snippet_is_python(technique: Technique) -> None:
    ast.parse(technique.how, filename=f"<{technique.id}>")
    assert technique.how == technique.how.strip("\n"), "snippet has leading/trailing blank lines"


def test_required_ids_present() -> None:
    missing = sorted(set(REQUIRED_IDS) - set(catalog.ids()))
    assert not missing, f"catalogue lacks required ids: {missing}"


def test_get_returns_the_entry() -> None:
    for t in TECHNIQUES:
        assert catalog.get(t.id) is t
    assert catalog.get("channels-last").family == "compute"


def test_get_unknown_id_names_known_ids() -> None:
    with pytest.raises(KeyError) as exc:
        catalog.get("no-such-technique")
    message = str(exc.value)
    assert "no-such-technique" in message
    for technique_id in ("amp-bf16", "loader-workers", "lr-schedule"):
        assert technique_id in message


def test_for_device_filters_by_device() -> None:
    cpu = {t.id for t in catalog.for_device("cpu")}
    cuda = {t.id for t in catalog.for_device("cuda")}
    assert "amp-bf16" in cpu and "amp-bf16" in cuda
    assert "cudnn-benchmark" in cuda and "cudnn-benchmark" not in cpu
    assert cpu | cuda == set(catalog.ids())


def test_every_guide_is_cited() -> None:
    cited = {key for t in TECHNIQUES for key in t.guides}
    uncited = sorted(set(GUIDES) - cited)
    assert not uncited, f"guides no technique cites: {uncited}"


def test_docs_are_up_to_date() -> None:
    expected = render_markdown()
    actual = DOCS.read_text(encoding="utf-8") if DOCS.exists() else ""
    assert actual == expected, (
        "docs/techniques.md is stale or missing: run `make docs` "
        "(torchpace techniques --write-docs docs/techniques.md) and commit the result"
    )


def test_render_is_deterministic_and_complete() -> None:
    text = render_markdown()
    assert text == render_markdown()
    assert "torchpace techniques --write-docs docs/techniques.md" in text
    assert "make docs" in text
    for t in TECHNIQUES:
        assert f'<a id="{t.id}"></a>' in text
        assert f"](#{t.id})" in text


def test_render_shows_measured_figure_or_placeholder() -> None:
    base = catalog.get("channels-last")
    measured = dataclasses.replace(base, measured="<ratio> on <hardware>, <versions>")
    unmeasured = dataclasses.replace(base, measured="")
    assert f"**Measured.** {NOT_MEASURED}" in render_markdown((unmeasured,))
    text = render_markdown((measured,))
    assert "**Measured.** <ratio> on <hardware>, <versions>" in text
    assert NOT_MEASURED not in text


def test_catalog_import_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import torchpace.catalog, torchpace.catalog_docs\n"
        "assert 'torch' not in sys.modules, 'the catalogue imported torch'\n"
        "torchpace.catalog_docs.render_markdown()\n"
        "assert 'torch' not in sys.modules, 'rendering the docs imported torch'\n"
    )
    src = str(ROOT / "src")
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert proc.returncode == 0, proc.stderr
