"""``landfall report`` rendered by a real browser: Debian's ``chromium`` in headless mode loads the page built from
the small real flow (``tests/flow.py``); every dataset and job is on it, the loss curves have points, the page's
script ran and logged no console message, and a screenshot is kept (its path is printed).

Console errors: Chromium started with ``--enable-logging=stderr --v=0`` writes every console message of the page,
uncaught exceptions included, as a ``:CONSOLE:`` line on stderr; ``test_the_console_check_sees_a_script_error``
shows that this catches a page whose script throws. Network is cut (``--host-resolver-rules``), so a page that
needed an external asset would fail to load it, and log that too.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from landfall import cli

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
         "--host-resolver-rules=MAP * ~NOTFOUND"]
CONSOLE = re.compile(r":CONSOLE(?::\d+)?\] (.*)")


def chromium() -> str:
    found = shutil.which("chromium")
    if not found:
        pytest.fail("Debian's `chromium` is not installed (apt-get install chromium); the report's browser test "
                    "needs it")
    return found


def browse(page: Path, profile: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *mode, page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def console_messages(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [m.group(1) for line in proc.stderr.splitlines() if (m := CONSOLE.search(line))]


class Dom(HTMLParser):
    """The elements of the dumped DOM, with their attributes and text."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self.stack: list[list[str]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        texts: list[str] = []
        self.elements.append((tag, {k: v or "" for k, v in attrs}, texts))
        if tag not in ("circle", "line", "rect", "polyline", "meta", "br", "img", "input"):
            self.stack.append(texts)

    def handle_endtag(self, tag):
        if self.stack and tag not in ("circle", "line", "rect", "polyline", "meta", "br", "img", "input"):
            self.stack.pop()

    def handle_data(self, data):
        for texts in self.stack:
            texts.append(data)

    def find(self, tag: str, **attrs: str) -> list[tuple[dict[str, str], str]]:
        return [(a, "".join(t)) for g, a, t in self.elements
                if g == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


@pytest.fixture(scope="module")
def page(small_flow, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    env = {**small_flow.env()}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        assert cli.main(["report", "--out", str(out), "--dead-letter", small_flow.dead_letter]) == 0
    return out


def test_the_report_is_self_contained(page):
    text = page.read_text()
    assert not re.search(r"<(?:link|img|iframe)\b", text)
    refs = re.findall(r"\b(?:src|href)\s*=\s*\"([^\"]*)\"", text)
    assert all(r.startswith("#") for r in refs), refs  # in-page anchors only


def test_chromium_renders_every_dataset_and_job_with_curves(small_flow, page, tmp_path):
    proc = browse(page, tmp_path / "profile", "--dump-dom")
    assert console_messages(proc) == [], console_messages(proc)
    dom = Dom(proc.stdout)
    assert {a["data-dataset"] for a, _ in dom.find("section") if "data-dataset" in a} == {"sensors", "pumps"}
    jobs = {a["data-job"]: text for a, text in dom.find("div") if "data-job" in a}
    assert set(jobs) == set(small_flow.jobs.values())
    assert "Succeeded" in jobs[small_flow.jobs["trained"]] and "verdict promoted" in jobs[small_flow.jobs["trained"]]
    assert "Running" in jobs[small_flow.jobs["running"]] and "Failed" in jobs[small_flow.jobs["failed"]]
    for series in ("loss", "val_loss"):
        (line,) = dom.find("polyline", data_series=series)  # the one job that trained has epochs
        pairs = line[0]["points"].split()
        assert len(pairs) == 2 and all(re.fullmatch(r"[\d.]+,[\d.]+", p) for p in pairs), pairs
    # The trained job's candidates as a table (issue #66): one row each, the chosen one marked, its kind on hover.
    (table,) = dom.find("table", **{"class": "candidates"})
    (chosen,) = dom.find("tr", **{"class": "chosen"})
    assert "★" in chosen[1] and "candidates by surrogate average precision over kinds" in table[1]
    named = {a["title"] for a, _ in dom.find("td") if a.get("title")}
    assert any("principal components" in t for t in named) and "model" in table[1]
    (champion,) = dom.find("p", **{"class": "champion"})
    assert small_flow.jobs["trained"] in champion[1]
    assert len(dom.find("rect", **{"class": "bar"})) >= 2 and dom.find("line", **{"class": "threshold"})
    # Where the trained job's time went (#42): a bar per phase and worker, rows and axis named.
    assert dom.find("svg", **{"class": "timeline"}) and len(dom.find("rect", **{"class": "phase"})) >= 10
    assert "seconds from the job's start" in proc.stdout and "outside the epochs" in jobs[small_flow.jobs["trained"]]
    times = dom.find("time")
    assert times and all(a.get("title") for a, _ in times)  # the page's script ran: it localised every time
    text = proc.stdout
    assert "corrupt_npy" in text and f"{small_flow.dead_letter}: 1 waiting" in text
    assert f"released once {small_flow.jobs['running']} ends" in text  # status's explanation (views.waiting)

    shot = tmp_path / "report.png"
    browse(page, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1200,2400",
           "--hide-scrollbars")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"report screenshot: {shot}")


def test_the_console_check_sees_a_script_error(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>notDefinedAnywhere();</script></body></html>")
    messages = console_messages(browse(bad, tmp_path / "profile", "--dump-dom"))
    assert any("Uncaught ReferenceError: notDefinedAnywhere is not defined" in m for m in messages), messages


def test_the_report_json_shape_is_what_the_page_shows(small_flow):
    from landfall.cli.trace import open_reader
    from landfall.submit.config import JobConfig
    from landfall.views import page

    cfg = JobConfig.load(small_flow.env())
    data = page.collect(open_reader(cfg, small_flow.bucket))
    sensors = next(d for d in data["datasets"] if d["name"] == "sensors")
    assert sorted(a["state"] for a in sensors["arrivals"]) == ["converted", "converted", "converted", "rejected",
                                                                "retracted"]
    assert [h["run"] for h in sensors["history"]] == [small_flow.jobs["trained"]]
    assert sorted(p["request_id"] for p in sensors["pending"]) == sorted(
        small_flow.arrivals[k].request_id for k in ("pending", "retracted"))
    assert data["rejections_by_reason"] == [{"stage": "arrival", "reason": "corrupt_npy", "count": 1}]
    json.dumps(data)  # all of it is plain data


def test_the_candidates_table_marks_the_choice_and_says_what_was_passed_over():
    """``page.candidates_html`` (issue #66): one row per candidate, the chosen one first and marked, its kind on hover
    and its unit; the candidates passed over and why under the table; figures of another JSON type shown as '-'."""
    import html

    from landfall.views import page

    job = {"challenger_loss": 0.5, "beaten_by": ["pca"],
           "baselines": {"pca": {"description": "principal components", "loss": 0.4, "skill": -0.2},
                         "pca_rows": {"description": "single rows", "unit": "row"}},
           "detection": {"basis": "surrogate average precision over kinds", "key": "kind_average_precision",
                         "chosen": "pca_rows", "passed_over": {"model": "skill 0.01 below min_skill 0.1"},
                         "candidates": {"model": {"kind_average_precision": 0.9},
                                        "pca": {"kind_average_precision": "high"},
                                        "pca_rows": {"kind_average_precision": 0.7}}}}
    got = page.candidates_html(job)
    rows = got.split("<tr")[2:]  # the header, then one per candidate
    assert len(rows) == 3 and 'class="chosen"' in rows[0] and ">pca_rows<" in rows[0] and "&#9733;" in rows[0]
    assert 'title="single rows"' in rows[0] and ">row<" in rows[0] and 'title="principal components"' in got
    assert ">model<" in rows[1] and ">-<" in rows[2]  # a score of another type is no score
    text = html.unescape(got)
    assert "passed over: model (skill 0.01 below min_skill 0.1)" in text and "better than the model: pca" in text
    assert page.candidates_html({"detection": {"candidates": "x"}}) == "" == page.candidates_html({})


def test_what_a_record_holds_is_text_on_the_page_never_markup():
    """Anything the bucket's records hold (a candidate's description, why one was passed over, a reason) is escaped:
    a hostile string, or an error message quoting ``<tag>``, is shown as text, never taken as the page's markup."""
    from landfall.views import page

    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    job = {"baselines": {"pca": {"description": hostile}},
           "detection": {"basis": hostile, "chosen": "model", "passed_over": {"pca": hostile},
                         "candidates": {"model": {"score": 0.5}, "pca": {"score": 0.4}}}}
    got = page.candidates_html(job)
    assert got and "<script" not in got and "<img" not in got
    assert got.count("&lt;script&gt;") >= 3  # the basis, the description on hover, the reason passed over
