"""Every string from the user's code or environment reaches the page as text, never as markup:
paths, messages, module names, command lines, trial names (in tables and inside the SVG charts).
The page is parsed as a browser's tokenizer would and its elements and attributes checked."""

from __future__ import annotations

from html.parser import HTMLParser

from report_helpers import DOCTOR, TUNE, result

from torchpace.report import document
from torchpace.report.html import page

SCRIPT = "<script>alert('pwned')</script>"
IMG = '"><img src=x onerror=alert(1)>'
EVIL = f"{SCRIPT}{IMG}"


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def parsed(html: str) -> Page:
    p = Page()
    p.feed(html)
    p.close()
    return p


def planted_doctor() -> dict:  # type: ignore[type-arg]
    res = result(DOCTOR)
    res["target"]["script"] = f"/home/ada/{EVIL}/train.py"
    res["target"]["args"] = ["--name", EVIL]
    res["target"]["cwd"] = f"/home/ada/{IMG}"
    res["command"] = ["torchpace", "doctor", EVIL]
    res["env"]["device_name"] = EVIL
    f = res["findings"][0]
    f["message"], f["fix"], f["path"] = EVIL, EVIL, f"/srv/{EVIL}.py"
    res["syncs"][0]["call"] = EVIL
    res["skipped_patterns"] = {"blocking-copies": EVIL}
    res["lint_errors"] = [EVIL]
    res["settings"]["models"] = [EVIL]
    return res


def planted_tune() -> dict:  # type: ignore[type-arg]
    res = result(TUNE)
    res["recipe"] = f"{EVIL}.py"
    res["command"] = ["torchpace", "tune", EVIL]
    for row in res["rows"]:
        if row["name"] == "bf16":
            row["name"], row["verdict"] = EVIL, f"rejected: {EVIL}"
    for trial in res["trials"]:
        if trial["name"] == "bf16":
            trial["name"] = EVIL  # the chart labels and data tables
    res["batch_search"][0]["guard"] = EVIL
    return res


def check(html: str) -> Page:
    p = parsed(html)
    tags = {tag for tag, _ in p.tags}
    assert "img" not in tags
    assert [tag for tag, _ in p.tags].count("script") == 1  # the page's own print helper
    assert "pwned" not in "".join(p.scripts)
    for tag, attrs in p.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            assert "alert" not in (value or ""), (tag, name, value)
    text = "".join(p.text)
    assert SCRIPT in text and IMG in text  # shown, as written
    return p


def test_planted_markup_in_a_doctor_result_is_shown_as_text() -> None:
    html = page([document("doctor", planted_doctor())])
    p = check(html)
    text = "".join(p.text)
    assert f"/home/ada/{IMG}" in text and f"/srv/{EVIL}.py:55" in text


def test_planted_markup_in_a_tune_result_is_shown_as_text_in_tables_and_charts() -> None:
    html = page([document("tune", planted_tune())])
    check(html)
    svgs = html.split("<svg")[1:]
    # The trial's name is a label in the speed-up, loss and memory charts, escaped by matplotlib.
    assert (
        sum("&lt;script&gt;alert(&#x27;pwned&#x27;)" in s or "&lt;script&gt;" in s for s in svgs)
        == 3
    )


def test_two_results_on_one_page_share_no_id() -> None:
    html = page([document("doctor", planted_doctor()), document("tune", planted_tune())])
    check(html)
    ids = [v for _, attrs in parsed(html).tags for k, v in attrs if k == "id"]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})[:5]
