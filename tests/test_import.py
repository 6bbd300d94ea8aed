"""``import torchpace`` must not import torch, and nothing in it may initialise CUDA."""

from __future__ import annotations

from conftest import run_python


def test_import_does_not_import_torch() -> None:
    code = (
        "import sys, torchpace\n"
        "assert 'torch' not in sys.modules, 'import torchpace imported torch'\n"
        "import torchpace.catalog, torchpace.workloads, torchpace.cli\n"
        "assert 'torch' not in sys.modules, 'catalogue/cli/workloads index imported torch'\n"
        "print(torchpace.__version__)\n"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


def test_the_cli_and_the_report_package_import_no_plotting_or_templates() -> None:
    # `torchpace lint` builds the whole parser: the report's matplotlib and jinja2 (and torch)
    # are imported only when a report is rendered.
    code = (
        "import sys, torchpace.cli, torchpace.report\n"
        "torchpace.cli.build_parser()\n"
        "heavy = {'torch', 'matplotlib', 'jinja2', 'rich'} & set(sys.modules)\n"
        "assert not heavy - {'rich'}, heavy\n"
        "print('ok')\n"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_lazy_attributes_resolve() -> None:
    code = (
        "import sys, torchpace\n"
        "assert torchpace.catalog.get('channels-last').id == 'channels-last'\n"
        "assert 'torch' not in sys.modules\n"
        "try:\n    torchpace.nope\nexcept AttributeError as e:\n    print('ok', e)\n"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok")


def test_nothing_initialises_cuda() -> None:
    code = (
        "import torchpace, torchpace.measure.env, torchpace.measure.paired, torchpace.bench.run\n"
        "import torchpace.bench.trainer, torchpace.workloads.cnn, torchpace.workloads.lm\n"
        "import torchpace.workloads.seqcls, torchpace.measure.memory, torch\n"
        "assert not torch.cuda.is_initialized(), 'importing torchpace initialised CUDA'\n"
        "print('ok')\n"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
