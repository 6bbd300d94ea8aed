"""``torchpace report``: terminal view and page from result files, and errors that say what to
give instead, without writing anything."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from report_helpers import DOCTOR, TUNE

from torchpace.cli import main


def test_report_prints_the_view_and_writes_the_page_beside_the_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "doctor.json"
    shutil.copy(DOCTOR, src)
    assert main(["report", str(src)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("torchpace doctor\n")
    assert "Findings, ranked by estimated gain" in out
    assert out.endswith(f"wrote {tmp_path / 'doctor.html'}\n")
    assert 'id="findings"' in (tmp_path / "doctor.html").read_text()


def test_two_results_go_on_one_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "out.html"
    assert main(["report", str(DOCTOR), str(TUNE), "-o", str(html), "--quiet"]) == 0
    assert capsys.readouterr().out == f"wrote {html}\n"
    text = html.read_text()
    assert text.index('id="r1-findings"') < text.index('id="r2-verdicts"')


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{", "not valid JSON"),
        ('{"kind": "bench"}', "not a torchpace doctor, tune or compare result"),
    ],
)
def test_a_bad_result_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    src = tmp_path / "r.json"
    if content is not None:
        src.write_text(content)
    assert main(["report", str(src), "-o", str(tmp_path / "r.html")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_the_page_never_overwrites_a_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "doctor.json"
    shutil.copy(DOCTOR, src)
    assert main(["report", str(src), "-o", str(src)]) == 2
    assert "is one of the results" in capsys.readouterr().err
    assert src.read_bytes() == DOCTOR.read_bytes()


def test_an_output_in_a_missing_folder_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(DOCTOR), "-o", str(tmp_path / "nope" / "r.html")]) == 2
    assert f"{tmp_path / 'nope'} does not exist" in capsys.readouterr().err


def test_the_demo_ends_by_writing_the_report_and_printing_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The demo's three measuring steps stand in for themselves by writing the committed results
    # (a real demo run is `make demo`, 1.5 minutes); what is tested is that the report follows.
    from torchpace.doctor import command as doctor
    from torchpace.lint import command as lint
    from torchpace.tune import command as tune

    monkeypatch.setattr(lint, "run", lambda args: 1)  # lint found slow patterns: exit 1
    monkeypatch.setattr(doctor, "run", lambda args: shutil.copy(DOCTOR, args.json) and 0)
    monkeypatch.setattr(
        tune, "run", lambda args: shutil.copy(TUNE, args.out / "torchpace-tune.json") and 0
    )
    out = tmp_path / "demo"
    out.mkdir()
    assert main(["demo", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    html = out / "report.html"
    assert printed[-1] == f"open it in a browser: {html.resolve().as_uri()}"
    page = html.read_text()
    assert 'id="r1-findings"' in page and 'id="r2-verdicts"' in page


@pytest.mark.broken_results
def test_a_hostile_result_file_cannot_command_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 17: window title (OSC 0), screen clear (CSI 2 J) and a link (OSC 8) in a result
    # file someone hands you went straight to the terminal.
    import json

    doc = json.loads(DOCTOR.read_text())
    payload = "\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\x9b31m"
    doc["script"] = f"train{payload}.py"
    for finding in doc["findings"]:
        finding["message"] = f"msg{payload}"
    src = tmp_path / "doctor.json"
    src.write_text(json.dumps(doc))
    assert main(["report", str(src), "-o", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\x9b")
    assert "\\x1b]0;pwned\\x07" in out  # shown, harmlessly, as text


def test_lint_prints_hostile_file_names_harmlessly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    name = "evil\x1b]0;pwned\x07.py"
    (tmp_path / name).write_text("from torch.utils.data import DataLoader\nl = DataLoader(d)\n")
    (tmp_path / "bad\x1b[2J.py").write_bytes(b"\0")
    assert main(["lint", "."]) == 2
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "evil\\x1b]0;pwned\\x07.py:2:5: TP101" in out


@pytest.mark.broken_results
@pytest.mark.parametrize("change", [{"findings": "abc"}, {"steps": "x"}, {"findings": [1, 2]}])
def test_a_wrong_typed_field_is_exit_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, object]
) -> None:
    import json

    doc = json.loads(DOCTOR.read_text())
    doc.update(change)
    src = tmp_path / "doctor.json"
    src.write_text(json.dumps(doc))
    assert main(["report", str(src), "-o", str(tmp_path / "r.html"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "has a field of the wrong type" in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()
