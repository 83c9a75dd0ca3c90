"""The standalone report: every section's numbers and figures, its settings, and the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from posviz import report, simulate
from posviz.embedding import MIN_DIMS, MIN_POSITIONS, Embedding
from posviz.report import build_report, report_sections
from posviz.spectrum import NO_VARIANCE, spectrum
from tests import ROOT


@pytest.fixture(autouse=True)
def no_earlier_report(monkeypatch) -> None:
    """Each test starts with nothing a report of this process kept (what it computes, it
    computes)."""
    monkeypatch.setattr(report, "_LATEST", {})


@pytest.fixture(scope="module")
def table() -> Embedding:
    return simulate.learned_like(200, 48, seed=1)


@pytest.fixture(scope="module")
def html(table) -> str:
    return build_report(table, center=True, seed=3)


def embedded(page: str) -> dict:
    """The JSON a report embeds: provenance, and each table of numbers with what made it."""
    block = re.search(r'<script id="posviz-data" type="application/json">(.*?)</script>', page)
    return json.loads(block.group(1))


@pytest.mark.slow
def test_every_section_has_its_figures_and_numbers(table):
    sections = {s.title: s for s in report_sections(table, center=True, seed=3)}
    assert list(sections) == ["Spectrum", "Similarity", "Components", "Boundaries", "Probes"]
    assert all(s.figures for s in sections.values())
    metrics = sections["Spectrum"].tables["Metrics"].iloc[0]
    expected = spectrum(table.values, center=True).metrics()
    assert metrics["effective_rank"] == pytest.approx(expected["effective_rank"], rel=1e-12)
    assert metrics["k90"] == expected["k90"]
    flagged = sections["Boundaries"].tables["Flagged positions"]
    assert {0, 199} <= set(flagged["position"])  # learned-like boosts both end rows
    probes = sections["Probes"].tables["Probe results"]
    assert list(probes["table"]) == ["table", "row-shuffled", "Gaussian"]


def test_html_is_standalone_and_states_its_settings(html, table):
    assert html.count("<script src=") == 0  # plotly.js is inlined: opens offline
    assert html.count('class="plotly-graph-div"') == 8
    data = embedded(html)
    assert data["provenance"]["sha256"] == table.sha256
    analyses = {entry["caption"]: entry for entry in data["analyses"]}
    assert analyses["Metrics"]["params"] == {"center": True}
    assert analyses["Likeness to sinusoids"]["params"]["seed"] == 3
    assert analyses["Probe results"]["params"]["seed"] == 3
    assert analyses["Change points"]["analysis"] == "change_points"
    assert analyses["Metrics"]["columns"]["k90"] == [spectrum(table.values).k_at(0.9)]
    for heading in ("Spectrum", "Similarity", "Components", "Boundaries", "Probes"):
        assert f"<h2>{heading}</h2>" in html
    assert f"{spectrum(table.values).effective_rank:.6g}" in html


def test_a_hostile_tensor_name_cannot_escape_the_settings_block():
    evil = Embedding.from_array(
        np.random.default_rng(0).standard_normal((40, 8)),
        name="</script><script>alert(1)</script>",
        source="x.safetensors",
    )
    page = build_report(evil)
    assert "<script>alert(1)</script>" not in page
    assert embedded(page)["provenance"]["tensor"] == evil.name


@pytest.mark.parametrize("name", ["<!--<script>", "a & b > c", "<![CDATA[", "--><b>x</b>"])
def test_embedded_json_escapes_every_html_special_character(name):
    # Formerly: "<!--<script>" turned the rest of the report into a comment (0 of 8 charts).
    evil = Embedding.from_array(
        np.random.default_rng(0).standard_normal((40, 8)), name=name, source=name
    )
    page = build_report(evil)
    block = re.search(r'<script id="posviz-data" type="application/json">(.*?)</script>', page)
    assert not set("<>&") & set(block.group(1))
    assert embedded(page)["provenance"]["tensor"] == name
    assert page.count('class="plotly-graph-div"') == 8
    assert page.count("<!--") == page.count("-->")  # no comment left open


def smallest(kind: str) -> Embedding:
    """A table of exactly the smallest size posviz analyses."""
    shape = (MIN_POSITIONS, MIN_DIMS)
    values = {
        "random": np.random.default_rng(0).standard_normal(shape),
        "constant": np.ones(shape),  # every row equal: no variance once centred
        "ramp": np.arange(MIN_POSITIONS * MIN_DIMS, dtype=float).reshape(shape),
    }[kind]
    return Embedding.from_array(values, name=kind, source="test")


@pytest.mark.slow
@pytest.mark.filterwarnings("error::RuntimeWarning")  # no 0 / 0 left to numpy to point out
@pytest.mark.parametrize("kind", ["random", "constant", "ramp"])
@pytest.mark.parametrize("center", [True, False])
def test_the_report_works_at_the_smallest_table(kind, center):
    # Formerly: the monotonicity window's default of 32 failed every table of <= 32 rows.
    table = smallest(kind)
    sections = {s.title: s for s in report_sections(table, center=center)}
    assert all(s.figures for s in sections.values())
    # Every offset the table has, stated beside the scores.
    assert f"monotonicity over offsets 1..{MIN_POSITIONS - 1}." in sections["Similarity"].note
    likeness = sections["Components"].tables["Likeness to sinusoids"].iloc[0]
    assert likeness["n_frequencies"] == MIN_POSITIONS // 2
    assert len(sections["Probes"].tables["Probe results"]) == 3
    page = build_report(table, center=center)
    assert page.count('class="plotly-graph-div"') == 8
    assert (NO_VARIANCE in page) == (kind == "constant" and center)


@pytest.mark.slow
def test_cli_writes_the_report(tmp_path):
    path = tmp_path / "table.npy"
    np.save(path, simulate.sinusoidal_table(128, 32))
    out = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "posviz", "report", str(path), "-o", str(out), "--no-center"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "wrote" in done.stdout
    page = out.read_text()
    assert embedded(page)["analyses"][0]["params"] == {"center": False}
    assert "table.npy" in page


@pytest.mark.slow
def test_cli_report_refuses_a_pickle_with_exit_code_2(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(b"\x80\x04\x95\x00")
    done = subprocess.run(
        [sys.executable, "-m", "posviz", "report", str(path), "-o", str(tmp_path / "r.html")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "pickle" in done.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_the_report_computes_each_step_once_and_says_what_it_is_doing(table, monkeypatch):
    from posviz import pipeline

    calls: list[str] = []
    original = pipeline.position_statistics

    def counted(*args, **kwargs):
        calls.append("position_statistics")
        return original(*args, **kwargs)

    # Outliers, change points and the boundary summary each ask for the statistics.
    monkeypatch.setattr(pipeline, "position_statistics", counted)
    told: list[tuple[str, int, int]] = []
    build_report(table, seed=3, progress=lambda *step: told.append(step))
    assert calls == ["position_statistics"]
    assert told == [
        ("Spectrum", 0, 6),
        ("Similarity", 1, 6),
        ("Components", 2, 6),
        ("Boundaries", 3, 6),
        ("Probes", 4, 6),
        ("writing the page", 5, 6),
    ]


@pytest.mark.slow
def test_a_second_report_of_the_table_computes_only_what_its_settings_change(monkeypatch):
    import functools

    from posviz import pipeline

    # The report's runner calls a step only when it has no result for it: each call computes.
    computed: list[str] = []
    for name in [
        "spectrum",
        "principal_components",
        "similarity_map",
        "position_statistics",
        "probe_with_controls",
    ]:
        step = getattr(pipeline, name)
        counted = functools.wraps(step)(
            lambda *a, step=step, **k: computed.append(step.__name__) or step(*a, **k)
        )
        monkeypatch.setattr(pipeline, name, counted)
    table = simulate.learned_like(90, 20, seed=11)
    first = build_report(table, seed=3)
    assert set(computed) == {
        "spectrum",
        "principal_components",
        "similarity_map",
        "position_statistics",
        "probe_with_controls",
    }
    computed.clear()
    second = build_report(table, seed=3)
    assert computed == []
    # The same page (bar the minute it was made): nothing the first report drew was changed.
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")
    assert stamp.sub("", second) == stamp.sub("", first)
    # Another centring: what centres is computed again, the probes and statistics are not.
    build_report(table, seed=3, center=False)
    assert "probe_with_controls" not in computed
    assert "position_statistics" not in computed
    assert {"spectrum", "similarity_map"} <= set(computed)
    # Another table's report keeps only its own: the first table's are computed again.
    build_report(simulate.learned_like(90, 20, seed=12), seed=3)
    computed.clear()
    build_report(table, seed=3)
    assert "probe_with_controls" in computed


def test_a_runner_given_by_the_app_is_asked_for_every_result(table):
    from posviz.report import memo

    asked: list[str] = []
    inner = memo()

    def run(step, /, *tables, **settings):
        asked.append(step.__name__)
        return inner(step, *tables, **settings)

    report_sections(table, seed=3, run=run)
    assert {"spectrum", "similarity_map", "probe_with_controls", "outliers"} <= set(asked)


def test_empty_tables_say_none_and_a_repeated_setting_is_stated_once(html):
    from posviz.report import _table_html

    assert _table_html(pd.DataFrame({"position": []})) == "<p class='none'>none</p>"
    frame = pd.DataFrame({"table": ["a", "b"], "mae_sd_folds": [1.0, 2.0], "model": ["m", "m"]})
    page = _table_html(frame)
    assert "<th>MAE sd over folds</th>" in page
    assert "<td>m</td>" not in page
    assert "In every row, model: m." in page
    # The probes' model, the same in all three rows, leaves the table for a note.
    assert "In every row, absolute model: " in html


@pytest.fixture(scope="module")
def wide() -> tuple[Embedding, str]:
    table = simulate.learned_like(512, 384)
    return table, build_report(table)


def test_a_report_of_512_by_384_fits_in_3_mb_and_keeps_every_number(wide):
    # Formerly 6.9 MB: plotly.js inlined as it is (4.8 MB) and the map's 512² cells (1.7 MB).
    table, page = wide
    assert len(page.encode()) < 3_000_000
    values = embedded(page)["analyses"][1]["columns"]
    np.testing.assert_allclose(
        values["singular_value"], spectrum(table.values).singular_values, rtol=1e-12
    )
    assert len(values["k"]) == 384


def test_a_long_table_shows_its_first_rows_and_the_ones_that_matter(wide):
    # Formerly: all 384 singular values in one long table.
    table, page = wide
    start = page.index("<h3>Singular values</h3>")
    shown = page[start : page.index("</table>", start)]
    ks = [int(k) for k in re.findall(r"<tr>\s*<td>(\d+)</td>", shown)]
    s = spectrum(table.values)
    assert ks[:10] == list(range(1, 11))
    assert {s.k_at(0.99), s.n_above_noise, s.n_above_noise + 1, 384} <= set(ks)
    assert len(ks) < 25
    assert f"{len(ks)} of 384 rows shown" in page


def test_no_table_cell_reads_none_or_nan_and_a_wide_table_fits_the_page(wide):
    # Formerly: 11 cells read None or NaN; the probe table ran off the page (20 columns).
    _, page = wide
    cells = re.findall(r"<td>(.*?)</td>", page)
    assert cells
    assert not [c for c in cells if c.strip() in ("None", "NaN", "nan", "<NA>")]
    start = page.index("<h3>Probe results</h3>")
    probes = page[start : page.index("</table>", start)]
    header = re.search(r"<thead>(.*?)</thead>", probes, re.S).group(1)
    assert re.findall(r"<th>(.*?)</th>", header) == ["", "table", "row-shuffled", "Gaussian"]
    assert "Blank cells: the table has no range over draws" in page
    assert "<ol class='steps'><li>Seed 0; 5-fold cross-validation" in page


def test_the_packed_plotly_js_is_plotly_js():
    import base64
    import gzip

    from plotly.offline import get_plotlyjs

    from posviz.report import _packed_plotly

    assert gzip.decompress(base64.b64decode(_packed_plotly())).decode() == get_plotlyjs()
