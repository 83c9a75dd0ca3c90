"""`posviz rerun` reads an export as untrusted: every refusal is one line with exit 2 and
peak memory under the budget; nothing a file holds is quoted back; only registered steps run,
with their params within bounds; a Hub model is read from the environment's Hub (issue 37's
findings, made again here)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import save

import posviz
from posviz import simulate
from posviz.cli import main
from posviz.export import header, to_json
from posviz.recompute import read_export
from tests.refusals import refused


@pytest.fixture
def table() -> posviz.Embedding:
    return simulate.learned_like(40, 8, seed=1)


def export_of(step: str, table: posviz.Embedding, **params: object) -> dict:
    """A JSON export of `step` on `table` (simulated: rerun makes it again); its one column
    is no matter: a refusal comes first."""
    result = posviz.pipeline.STEPS[step].run(table, **params)
    return json.loads(to_json(pd.DataFrame({"x": [1.0]}), header(result, table)))


def rerun_refused(capsys, tmp_path: Path, export: dict | str, name: str = "e.json") -> str:
    path = tmp_path / name
    path.write_text(export if isinstance(export, str) else json.dumps(export))
    return refused(capsys, "rerun", str(path))


@pytest.mark.parametrize(
    ("step", "setting", "says"),
    [
        ("sinusoid_likeness", {"n_shuffles": 10**9}, "n_shuffles is 1000000000"),
        ("probe_with_controls", {"n_control_draws": 10**9}, "n_control_draws is 1000000000"),
        ("similarity_map", {"max_side": 10**6}, "max_side is 1000000"),
        ("outliers", {"threshold": float("inf")}, "threshold is inf"),
    ],
)
def test_params_past_their_bounds_are_refused(capsys, tmp_path, table, step, setting, says):
    export = export_of(step, table)
    export["params"].update(setting)
    line = rerun_refused(capsys, tmp_path, export)
    assert says in line
    assert "it must be a whole number" in line or "it must be a number" in line


def test_a_comparisons_permutations_are_bounded(capsys, tmp_path, table):
    other = simulate.gaussian(40, 8, seed=2)
    result = posviz.pipeline.compare(table, other, n_components=2, n_permutations=10)
    export = json.loads(to_json(pd.DataFrame({"x": [1.0]}), header(result, table, other)))
    export["params"]["n_permutations"] = 10**9
    assert "n_permutations is 1000000000" in rerun_refused(capsys, tmp_path, export)


def test_an_export_of_many_analyses_or_unknown_ones_is_refused(capsys, tmp_path, table):
    entry = {"analysis": "spectrum", "params": {}, "columns": {}}
    many = {"provenance": table.provenance(), "analyses": [entry] * 100_000}
    assert "more than 100" in rerun_refused(capsys, tmp_path, many)
    export = export_of("spectrum", table)
    export["analysis"] = "x" * 10**6  # echoed whole before
    assert "is not an analysis posviz can recompute" in rerun_refused(capsys, tmp_path, export)
    export["analysis"] = "_chained"  # a function of the pipeline, not a step
    assert "is not an analysis" in rerun_refused(capsys, tmp_path, export)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"first_position": "abc"}, "first_position is 'abc'"),
        ({"shape": [40.5, 8]}, "shape is 40.5"),
        ({"shape": "40x8"}, "is not [positions, dimensions]"),
        ({"row_start": -1}, "row_start is -1"),
        ({"grid": [1, 2, 3]}, "is not [height, width]"),
    ],
)
def test_a_provenance_with_nonsense_is_refused(capsys, tmp_path, table, change, says):
    export = export_of("spectrum", table)
    export["provenance"].update(change)
    assert says in rerun_refused(capsys, tmp_path, export)


def test_a_simulated_source_of_5000_digits_is_refused(capsys, tmp_path, table):
    text = json.dumps(export_of("spectrum", table))
    huge = text.replace('"n_positions": 40', '"n_positions": 1' + "0" * 4999)
    assert huge != text
    assert "is not a posviz export" in rerun_refused(capsys, tmp_path, huge)
    large = text.replace('"n_positions": 40', '"n_positions": 1' + "0" * 3999)
    assert "n_positions is 100000" in rerun_refused(capsys, tmp_path, large)


@pytest.mark.parametrize("suffix", ["json", "csv"])
def test_a_deeply_nested_export_is_refused_before_it_is_parsed(capsys, tmp_path, suffix):
    deep = "[" * 100_000 + "]" * 100_000  # a RecursionError (exit 1) before
    text = f'{{"analysis": {deep}}}' if suffix == "json" else f"# params: {deep}\nx\n1\n"
    line = rerun_refused(capsys, tmp_path, text, f"e.{suffix}")
    assert "nested deeper than 32 levels" in line


def test_no_file_content_is_quoted_back(capsys, tmp_path, table):
    secret = "sk-live-0123456789abcdef"
    (tmp_path / "keys.csv").write_text(f"name,key\nprod,{secret}\n")
    export = export_of("spectrum", table)
    del export["provenance"]["simulated"]
    export["provenance"]["source"] = "keys.csv"
    export["provenance"]["tensor"] = "keys"
    line = rerun_refused(capsys, tmp_path, export)
    assert secret not in line
    assert "its contents are not shown" in line
    # Nor the digest of a file that reads as a table but is not the export's.
    other = simulate.gaussian(40, 8, seed=9)
    np.save(tmp_path / "other.npy", other.values)
    export["provenance"]["source"], export["provenance"]["tensor"] = "other.npy", "other"
    line = rerun_refused(capsys, tmp_path, export)
    assert "is not the one exported" in line
    assert other.sha256[:8] not in line


def test_a_hub_model_is_read_from_the_environments_hub_saying_so_first(
    fake_hub, tmp_path, capsys, table
):
    wpe = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)
    fake_hub.add("acme/gpt2", {"model.safetensors": save({"transformer.wpe.weight": wpe})})
    assert main(["summary", "hf:acme/gpt2", "--json"]) == 0
    export = json.loads(capsys.readouterr().out)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(export))
    assert main(["rerun", str(path)]) == 0
    err = capsys.readouterr().err
    commit = export["provenance"]["commit"]
    assert err.startswith(f"posviz rerun: fetching hf:acme/gpt2@{commit} from http://127.0.0.1:")
    # An export cannot send the read elsewhere: a host in the repo id is refused unread.
    before = len(fake_hub.log)
    for repo in ("https://attacker.example/acme/gpt2", "a/b/c", "acme/../gpt2"):
        export["provenance"]["repo"] = repo
        assert "is not a model id" in rerun_refused(capsys, tmp_path, export)
    export["provenance"]["repo"] = "//attacker.example/gpt2"
    assert "not a repo id at a full commit sha" in rerun_refused(capsys, tmp_path, export)
    export["provenance"]["repo"], export["provenance"]["commit"] = "acme/gpt2", "main"
    assert "not a repo id at a full commit sha" in rerun_refused(capsys, tmp_path, export)
    assert len(fake_hub.log) == before


def test_reading_a_report_is_linear_in_its_length(tmp_path):
    # 490 KB of repeated opening tags took 36 s (a regular expression rescanning the rest of
    # the page from each tag). Four times the bytes now take about four times as long. CPU
    # seconds of this process: other work on a busy machine does not count against it.
    tag = '<script id="posviz-data" type="application/json">'

    def seconds(n: int) -> float:
        page = tmp_path / f"r{n}.html"
        page.write_text(tag * n + "</script>")
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            with pytest.raises(posviz.LoadError):
                read_export(page)
            best = min(best, time.process_time() - start)
        return best

    small, large = seconds(40_000), seconds(160_000)  # 2 MB and 8 MB
    assert large / small < 10  # quadratic: 16


# --- the heads of an attention layer ---------------------------------------------------------


@pytest.fixture
def heads_export(tmp_path: Path, capsys) -> dict:
    """`posviz heads --json` of the GPT-2-like fixture, copied beside the export."""
    import shutil

    from tests import ROOT

    shutil.copytree(ROOT / "tests" / "data" / "heads" / "gpt2", tmp_path / "gpt2")
    assert main(["heads", str(tmp_path / "gpt2"), "--json", "--positions", "4"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"params": {"n_draws": 10**9}}, "n_draws is 1000000000"),
        ({"params": {"n_positions": 10**6}}, "n_positions is 1000000"),
        ({"positions_printed": 10**6}, "positions is 1000000"),
        ({"provenance": {"layer": 10**12}}, "layer is 1000000000000"),
        ({"provenance": {"layer": 7}}, "there is no layer 7"),
        ({"provenance": {"tensors": "all"}}, "lists no tensors read with their sha256"),
        ({"provenance": {"tensors": [{"name": "x" * 10**5, "sha256": "0"}]}}, "not the 1 the"),
        ({"analysis": "rotary_heads"}, "its heads' step is learned_heads"),
    ],
)
def test_a_heads_export_is_read_as_untrusted(capsys, tmp_path, heads_export, change, says):
    for key, value in change.items():
        if isinstance(value, dict):
            heads_export[key].update(value)
        else:
            heads_export[key] = value
    line = rerun_refused(capsys, tmp_path, heads_export)
    assert says in line
    assert "x" * 100 not in line


def test_a_heads_export_of_other_weights_is_refused_naming_the_tensor(
    capsys, tmp_path, heads_export
):
    tensor = heads_export["provenance"]["tensors"][0]
    tensor["sha256"] = "0" * 64
    line = rerun_refused(capsys, tmp_path, heads_export)
    assert f"its tensor '{tensor['name']}' has sha256" in line
    assert "(the weights changed)" in line
