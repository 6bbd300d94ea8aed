"""The defects a reviewer who wrote none of the twenty-second session's lint changes reproduced
(issue 32), each a small project in ``fixtures/change25_review.json``, with what lint must say
of it. Each case fails on the reviewed code (e618290); the old code (216bdf6) said the same as
these expectations, except where a case says otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import project_findings

CASES = json.loads((Path(__file__).parent / "fixtures" / "change25_review.json").read_text())

EXPECTED = {
    # TP401: a module wrapping a conv with keyword arguments and no ``bias=`` crashed the rule
    # (the conv as called had no positions); the conv keeps its default bias before the norm
    "crash": ("TP401", [("blocks.py", 5)]),
    # an earlier ``return self.relu(self.conv(x))``: the norm gets an activated output
    "p7": ("TP401", []),
    # ``Conv(64, 128, 3, **cfg)`` may pass ``bias=False``
    "p5_c": ("TP401", []),
    # a keyword-only ``bias=True`` is the conv's bias (the old code missed it too)
    "p5_b": ("TP401", [("blocks.py", 12)]),
    # TP303: a collate resizing each image to one size through a helper that takes the max of
    # one image's sides; a helper clipping boxes to an image's shape; a padding loader of
    # another function bound to the same name; a padded validation loader beside a training
    # loader a project function builds: fixed-shape training batches, all reported
    "p1": ("TP303", [("main.py", 11)]),
    "p2": ("TP303", [("train.py", 18)]),
    "p3": ("TP303", [("main.py", 17)]),
    "p4": ("TP303", [("main.py", 11)]),
    # an export helper's ``model = ExportWrapper(model)`` does not make the training
    # function's ``model`` the wrapper: its forward's boolean masks stay reported
    "p8": ("TP203", [("train.py", 14), ("train.py", 14)]),
    # TP104: a loop that prepares the dataset before the loader exists, and a function that
    # never sees the loader, change nothing the workers hold
    "p11": ("TP104", [("other_fn.py", 16), ("setup_loop.py", 10)]),
    # TP503: an input's ``requires_grad_`` (a gradient penalty), a frozen teacher DDP does not
    # wrap, and a backbone frozen before the wrap by a helper defined below it
    "p10": ("TP503", [("gp.py", 7), ("later_def.py", 8), ("teacher.py", 7)]),
    # TP501: the function that hands the model to fit_one_epoch also evaluates it after
    "p9": ("TP501", [("train.py", 8)]),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_reviewed_defects_stay_mended(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, expected = EXPECTED[case]
    found = project_findings(tmp_path, CASES[case], code, capsys, "--include-unreferenced")
    assert sorted((Path(f["path"]).name, f["line"]) for f in found) == expected
