"""`posviz rerun`: every number of an export recomputed from the table its provenance names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

import posviz
from posviz import simulate
from posviz._params import Refused
from posviz.cli import main
from posviz.embedding import LoadError
from posviz.recompute import read_export
from posviz.schemes.presets import PRESETS
from tests import apptest


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "table.npy"
    np.save(path, simulate.learned_like(120, 24, seed=1).values)
    return path


def write(path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> Path:
    """What `posviz` prints for `argv`, saved as `path`."""
    assert main(list(argv)) == 0
    path.write_text(capsys.readouterr().out)
    return path


def rerun(capsys: pytest.CaptureFixture[str], export: Path, *options: str) -> tuple[int, str]:
    code = main(["rerun", str(export), *options])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_summary_reruns_to_the_same_numbers(saved, capsys):
    export = write(saved.parent / "s.json", capsys, "summary", str(saved), "--json", "--no-center")
    code, out = rerun(capsys, export)
    assert code == 0, out
    assert "spectrum k90: exported" in out
    assert "spectrum singular_values[9]: exported" in out
    # 12 metrics and the first 10 singular values, each compared.
    assert out.splitlines()[-1].startswith("22 of 22 numbers recomputed exactly from table")


def test_an_edited_number_is_reported_and_exits_1(saved, capsys):
    export = write(saved.parent / "s.json", capsys, "summary", str(saved), "--json")
    data = json.loads(export.read_text())
    data["numbers"]["effective_rank"] += 1e-9
    export.write_text(json.dumps(data))
    code, out = rerun(capsys, export)
    assert code == 1
    assert [line for line in out.splitlines() if line.endswith("DIFFERS")] == [
        line for line in out.splitlines() if line.startswith("spectrum effective_rank:")
    ]
    assert out.splitlines()[-1].endswith("; 1 differ")


def test_a_changed_or_missing_table_exits_2_saying_why(saved, tmp_path, capsys):
    export = write(tmp_path / "s.json", capsys, "summary", str(saved), "--json")
    values = np.load(saved)
    values[3, 0] += 1e-6
    np.save(saved, values)
    code, out = rerun(capsys, export)
    assert code == 2
    assert "is not the one exported: its sha256" in out
    saved.unlink()
    code, out = rerun(capsys, export)
    assert code == 2
    assert "table.npy was not found" in out
    assert "--table" in out


def test_the_table_can_be_given_elsewhere(saved, tmp_path, capsys):
    export = write(tmp_path / "s.json", capsys, "summary", str(saved), "--json")
    moved = tmp_path / "elsewhere" / "renamed.npy"
    moved.parent.mkdir()
    saved.rename(moved)
    assert rerun(capsys, export, "--table", str(moved))[0] == 0


def test_a_report_reruns_every_table_of_numbers(saved, capsys):
    out = saved.parent / "report.html"
    assert main(["report", str(saved), "-o", str(out), "--seed", "4"]) == 0
    capsys.readouterr()
    data = read_export(out)
    assert {entry["analysis"] for entry in data["analyses"]} == {
        "spectrum",
        "offset_scores",
        "fit_sinusoids",
        "sinusoid_likeness",
        "outliers",
        "change_points",
        "boundary_summary",
        "probe_with_controls",
    }
    code, printed = rerun(capsys, out)
    assert code == 0, printed
    assert "sinusoid_likeness (Likeness to sinusoids) p_value[0]" in printed
    # The Python API gives the same, structured.
    result = posviz.rerun(data, base=saved.parent)
    assert result.ok
    assert len(result.checks) == int(printed.splitlines()[-1].split()[0])
    assert result.tables[0].sha256 == data["provenance"]["sha256"]


@pytest.mark.parametrize(
    ("page", "state", "name"),
    [
        ("spectrum.py", {"spectrum.numbers": True}, "singular_values"),
        (
            "similarity.py",
            {"similarity.section": "Similarity vs offset", "similarity.numbers": True},
            "similarity_scores",
        ),
        ("boundaries.py", {"boundaries.section": "Tables"}, "change_points"),
    ],
)
def test_a_page_export_reruns(saved, downloads, capsys, page, state, name):
    if name == "change_points":  # a table with a change point, so the page offers its table
        values = simulate.learned_like(120, 256, seed=1).values
        np.save(saved, values * np.where(np.arange(120) < 60, 1.0, 1.2)[:, None])
    at = apptest(f"pages/{page}")
    at.session_state["posviz.table"] = posviz.load(saved)
    at.session_state["posviz.center"] = False
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    for suffix in ("json", "csv"):
        export = saved.parent / f"{name}.{suffix}"
        export.write_text(downloads[f"{name}.{suffix}"]())
        code, out = rerun(capsys, export)
        assert code == 0, out
        assert "DIFFERS" not in out


def test_json_lists_become_the_tuples_a_setting_takes(capsys, tmp_path):
    # grid_similarity's grid is a tuple; JSON writes a list. Recomputed as given, the numbers
    # agree (a result records the tuple either way).
    path = tmp_path / "vit.npy"
    np.save(path, simulate.vit_grid(6, 6, 16).values)
    table = posviz.load(path)
    result = posviz.pipeline.grid_similarity(table, grid=(6, 6))
    export = {
        "analysis": "grid_similarity",
        "params": json.loads(json.dumps(result.params)),
        "provenance": table.provenance(),
        "numbers": {"row_profile": result.row_profile.tolist()},
    }
    assert posviz.rerun(export, base=tmp_path).ok


def test_exports_that_cannot_be_rerun_say_why(saved):
    table = posviz.load(saved)
    resampled = posviz.pipeline.resample_length(table, n_positions=150)
    with pytest.raises(LoadError, match="made in the app"):
        posviz.rerun(
            {"analysis": "spectrum", "params": {}, "provenance": resampled.provenance()},
            base=saved.parent,
        )
    with pytest.raises(LoadError, match="resample_length makes a table, not numbers"):
        posviz.rerun(
            {"analysis": "resample_length", "params": {}, "provenance": table.provenance()},
            base=saved.parent,
        )
    # The registry is the allow-list: a module's other functions are no analyses.
    for name in ("call", "_chained", "STEPS", "__init__", "x" * 10**6):
        with pytest.raises(LoadError, match="is not an analysis posviz can recompute") as refused:
            posviz.rerun(
                {"analysis": name, "params": {}, "provenance": table.provenance()},
                base=saved.parent,
            )
        assert len(str(refused.value)) < 200
    with pytest.raises(LoadError, match="no provenance"):
        posviz.rerun({"analysis": "spectrum", "params": {}})
    old = {"analysis": "spectrum", "params": {"centered": True}, "provenance": table.provenance()}
    with pytest.raises(LoadError, match="unexpected keyword argument 'centered'"):
        posviz.rerun(old, base=saved.parent)
    with pytest.raises(LoadError, match="incomplete"):
        posviz.rerun({"analysis": "spectrum", "provenance": table.provenance()}, base=saved.parent)


def test_a_hub_model_reruns_at_its_commit(fake_hub, tmp_path, capsys):
    wpe = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)
    fake_hub.add("acme/gpt2", {"model.safetensors": save({"transformer.wpe.weight": wpe})})
    export = write(tmp_path / "s.json", capsys, "summary", "hf:acme/gpt2", "--json")
    provenance = json.loads(export.read_text())["provenance"]
    assert provenance["repo"] == "acme/gpt2"
    # The branch moves on; the export names the commit it was made at.
    moved = {"transformer.wpe.weight": wpe[::-1].copy()}
    fake_hub.add("acme/gpt2", {"model.safetensors": save(moved), "README.md": b"v2"})
    before = len(fake_hub.log)
    code, out = rerun(capsys, export)
    assert code == 0, out
    assert any(provenance["commit"] in sent.path for sent in fake_hub.log[before:])


def test_a_comparison_reruns_from_both_tables(tmp_path):
    for name, seed in (("a.npy", 1), ("b.npy", 2)):
        np.save(tmp_path / name, simulate.learned_like(100, 16, seed=seed).values)
    first, second = posviz.load(tmp_path / "a.npy"), posviz.load(tmp_path / "b.npy")
    result = posviz.pipeline.compare(first, second, n_components=4)
    header = posviz.export.header(result, first, second)
    data = json.loads(posviz.export.to_json(result.angles_table(), header))
    rerun = posviz.rerun(data, base=tmp_path)
    assert rerun.ok
    assert [t.sha256 for t in rerun.tables] == [first.sha256, second.sha256]
    assert len(rerun.checks) == 3 * 4  # angle, radians, degrees of each of the 4 angles
    data["columns"]["degrees"][0] += 1.0
    assert [c.name for c in posviz.rerun(data, base=tmp_path).differing] == ["degrees[0]"]


@pytest.mark.parametrize(
    "table",
    [
        simulate.learned_like(80, 16, seed=3),
        simulate.sinusoidal(60, 8, base=500.0),
        simulate.gaussian(40, 8, seed=7),
        simulate.vit_grid(5, 6, 16, prefix_tokens=2),
    ],
    ids=lambda t: t.name,
)
def test_a_simulated_table_is_made_again_from_its_source(table):
    # The app opens on a simulated table: its exports rerun without a file.
    result = posviz.pipeline.offset_scores(table, center=False)
    header = posviz.export.header(result, table)
    data = json.loads(posviz.export.to_json(result.to_frame(), header))
    rerun = posviz.rerun(data)
    assert rerun.ok
    assert rerun.tables[0].sha256 == table.sha256
    # The provenance records the generator and its arguments, which rerun calls again.
    simulated = data["provenance"]["simulated"]
    assert simulated["generator"] == table.source.split(": ")[1].split("(")[0]
    # Another seed's rows are refused by their bytes (vit_grid's seed makes only the prefix
    # rows, which are not analysed).
    if table.name in ("learned_like", "gaussian"):
        simulated["params"]["seed"] += 1
        with pytest.raises(LoadError, match="sha256"):
            posviz.rerun(data)


def test_a_simulation_is_made_again_only_within_its_bounds():
    table = simulate.gaussian(40, 8, seed=7)
    result = posviz.pipeline.spectrum(table)
    data = json.loads(posviz.export.to_json(result.to_frame(), posviz.export.header(result, table)))
    data["provenance"]["simulated"]["params"]["n_positions"] = 10**5000 // 10**1000
    with pytest.raises(Refused, match=r"n_positions is 1000000000000.*; it must be a whole"):
        posviz.rerun(data)
    data["provenance"]["simulated"] = {"generator": "os.system", "params": {}}
    with pytest.raises(LoadError, match="names a simulation posviz cannot make"):
        posviz.rerun(data)
    # An export of an older posviz named its simulation in text only: said so.
    del data["provenance"]["simulated"]
    with pytest.raises(LoadError, match="recorded by an older posviz"):
        posviz.rerun(data)


# --- position schemes: the config.json a record names, read again -----------------------------

LLAMA = "meta-llama/Llama-3.1-8B"


def config_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PRESETS[name], indent=2))
    return path


@pytest.mark.parametrize(
    ("name", "numbers"),
    [
        (
            LLAMA,
            ["inv_freq[63]", "bands.divided.division[28]", "attention_factor", "table.numbers.k90"],
        ),
        ("bigscience/bloom", ["slopes[111]", "n_heads"]),  # ALiBi, 112 heads
        ("google-t5/t5-small", ["buckets.encoder[0]", "buckets.decoder[256]", "max_distance"]),
    ],
)
def test_a_scheme_summary_reruns_from_its_config(tmp_path, capsys, name, numbers):
    path = config_file(tmp_path, name)
    export = write(tmp_path / "s.json", capsys, "summary", str(path), "--json", "--positions", "64")
    assert json.loads(export.read_text())["analysis"] == "scheme_record"
    code, out = rerun(capsys, export)
    assert code == 0, out
    checked = {line.split(":")[0].removeprefix("scheme_record ") for line in out.splitlines()}
    assert set(numbers) <= checked
    assert out.splitlines()[-1].endswith(f"numbers recomputed exactly from {path}")


def test_an_edited_scheme_number_exits_1(tmp_path, capsys):
    path = config_file(tmp_path, LLAMA)
    export = write(tmp_path / "s.json", capsys, "summary", str(path), "--json", "--positions", "64")
    data = json.loads(export.read_text())
    data["inv_freq"][40] *= 1 + 1e-12
    data["table"]["numbers"]["k90"] += 1
    export.write_text(json.dumps(data))
    code, out = rerun(capsys, export)
    assert code == 1
    differing = [line.split(":")[0] for line in out.splitlines() if line.endswith("DIFFERS")]
    assert differing == ["scheme_record inv_freq[40]", "scheme_record table.numbers.k90"]


def test_a_changed_or_missing_config_exits_2(tmp_path, capsys):
    path = config_file(tmp_path, LLAMA)
    export = write(tmp_path / "s.json", capsys, "summary", str(path), "--json")
    path.write_text(json.dumps(PRESETS[LLAMA]))  # the same settings, other bytes
    code, out = rerun(capsys, export)
    assert code == 2
    assert "config.json read from" in out
    assert "is not the one exported: its sha256" in out
    path.unlink()
    code, out = rerun(capsys, export)
    assert code == 2
    assert "config.json was not found" in out


@pytest.mark.parametrize(
    ("state", "name"),
    [
        ({"schemes.section": "Numbers"}, "rotary_frequencies"),
        ({"schemes.preset": "bigscience/bloom", "schemes.alibi": "Numbers"}, "alibi_slopes"),
        (
            {"schemes.section": "Similarity decay", "schemes.decay_numbers": True},
            "rotary_decay",
        ),
        ({"schemes.preset": "google-t5/t5-small", "schemes.bucket_numbers": True}, "t5_buckets"),
        # The per-layer map: NoPE layers' blanks, Llama-4's temperature, Qwen2-VL's pairs.
        ({"schemes.preset": "HuggingFaceTB/SmolLM3-3B", "schemes.section": "Layers"}, "layers"),
        (
            {"schemes.preset": "meta-llama/Llama-4-Scout-17B-16E", "schemes.section": "Layers"},
            "layers",
        ),
        ({"schemes.preset": "Qwen/Qwen2-VL-7B-Instruct", "schemes.section": "Layers"}, "layers"),
    ],
)
def test_a_schemes_page_export_reruns(downloads, tmp_path, capsys, state, name):
    at = apptest("pages/schemes.py")
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    for suffix in ("json", "csv"):
        export = tmp_path / f"{name}.{suffix}"
        export.write_text(downloads[f"{name}.{suffix}"]())
        code, out = rerun(capsys, export)
        assert code == 0, out
        assert "DIFFERS" not in out
    data = json.loads(export.with_suffix(".json").read_text())
    assert data["provenance"]["config"].startswith("preset:")
    column = {
        "rotary_frequencies": "inv_freq",
        "alibi_slopes": "slope",
        "rotary_decay": "similarity",
        "t5_buckets": "encoder_bucket",
        "layers": "layer",
    }[name]
    data["columns"][column][3] += 1
    assert [c.name for c in posviz.rerun(data).differing] == [f"{column}[3]"]


def test_the_gemma_sliding_layers_rerun_with_their_own_base(downloads, tmp_path, capsys):
    at = apptest("pages/schemes.py")
    at.session_state["schemes.preset"] = "google/gemma-3-4b-it"
    at.session_state["schemes.layer"] = "sliding_attention"
    at.session_state["schemes.section"] = "Numbers"
    at.run()
    data = json.loads(downloads["rotary_frequencies.json"]())
    assert data["provenance"]["layer_type"] == "sliding_attention"
    assert data["params"] == {"context": at.session_state["schemes.context"]}
    # Pair 1 of head_dim 256 rotates at the sliding layers' local base 10000 (the full layers'
    # is 1e6): 10000^(-2/256).
    assert data["columns"]["inv_freq"][1] == pytest.approx(1e4 ** (-2 / 256), rel=1e-15)
    assert posviz.rerun(data).ok


def test_a_hub_scheme_summary_reruns_at_its_commit(fake_hub, tmp_path, capsys):
    config = json.dumps(PRESETS[LLAMA]).encode()
    fake_hub.add(LLAMA, {"config.json": config})
    export = write(tmp_path / "s.json", capsys, "summary", f"hf:{LLAMA}", "--json")
    provenance = json.loads(export.read_text())["provenance"]
    commit = fake_hub.repos[LLAMA, "main"].commit
    assert provenance["config"] == f"hf:{LLAMA}@{commit}"
    # The branch moves on (another rope_theta); the export names the commit it was made at.
    moved = {**PRESETS[LLAMA], "rope_theta": 10000.0}
    fake_hub.add(LLAMA, {"config.json": json.dumps(moved).encode(), "README.md": b"v2"})
    before = len(fake_hub.log)
    code, out = rerun(capsys, export)
    assert code == 0, out
    assert "table.numbers.k99" in out
    assert any(commit in sent.path for sent in fake_hub.log[before:])


def test_a_hub_schemes_page_export_and_a_checked_inv_freq_rerun(fake_hub, downloads, capsys):
    repo = "acme/old-mistral"
    config = json.dumps(PRESETS["mistralai/Mistral-7B-v0.1"]).encode()
    inv_freq = (10000.0 ** (-np.arange(0, 128, 2) / 128)).astype(np.float32)[::-1].copy()
    name = "model.layers.0.self_attn.rotary_emb.inv_freq"
    fake_hub.add(repo, {"config.json": config, "model.safetensors": save({name: inv_freq})})
    commit = fake_hub.repos[repo, "main"].commit
    at = apptest("pages/schemes.py")
    at.session_state["schemes.source"] = "Hub model"
    at.session_state["schemes.section"] = "Numbers"
    at.run()
    at.text_input(key="schemes.repo").set_value(repo)
    at.button[0].click().run()
    assert not at.exception, at.exception
    data = json.loads(downloads["rotary_frequencies.json"]())
    assert data["provenance"]["config"] == f"hf:{repo}@{commit}"
    assert posviz.rerun(data).ok
    # A summary that checked the stored buffer reads it again (a wrong one: its difference).
    assert main(["summary", f"hf:{repo}", "--json", "--positions", "64", "--check-inv-freq"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["stored_inv_freq"]["matches"] is False
    result = posviz.rerun(record)
    assert result.ok
    names = [c.name for c in result.checks]
    assert "stored_inv_freq.max_relative_difference" in names
    record["stored_inv_freq"]["max_relative_difference"] /= 2
    assert [c.name for c in posviz.rerun(record).differing] == [
        "stored_inv_freq.max_relative_difference"
    ]


def test_the_quantization_errors_export_reruns_from_both_files(downloads, tmp_path, capsys):
    from safetensors.numpy import save_file

    from tests import ggufs

    values = simulate.learned_like(64, 32, seed=4).values.astype(np.float32)
    ggufs.learned(tmp_path / "gpt2-Q8_0.gguf", values, "Q8_0")
    save_file({"wpe.weight": values}, tmp_path / "gpt2.safetensors")
    at = apptest("pages/spectrum.py")
    at.session_state["posviz.table"] = posviz.load(
        tmp_path / "gpt2-Q8_0.gguf", tensor="position_embd.weight"
    )
    at.session_state["posviz.second"] = posviz.load(tmp_path / "gpt2.safetensors")
    at.session_state["spectrum.quantization"] = True
    at.run()
    assert not at.exception, at.exception
    for suffix in ("json", "csv"):
        export = tmp_path / f"quantization_error.{suffix}"
        export.write_text(downloads[f"quantization_error.{suffix}"]())
        code, out = rerun(capsys, export)
        assert code == 0, out
        assert "DIFFERS" not in out
    data = json.loads(export.with_suffix(".json").read_text())
    assert data["analysis"] == "quantization_error"
    assert [p["dtype"] for p in data["provenance"]] == ["Q8_0", "float32"]
    data["columns"]["value"][0] *= 2  # the relative error
    assert [c.name for c in posviz.rerun(data, base=tmp_path).differing] == ["value[0]"]


def test_the_schemes_pages_comparison_reruns_from_both_sources(downloads, tmp_path, capsys):
    from tests import ggufs

    # A (a known model's config.json, built in) against B (an uploaded GGUF, found again by
    # its name beside the export); a dump's rerun: tests/cli/test_diff.py.
    gguf = ggufs.llama31(tmp_path / "llama.gguf")
    at = apptest("pages/schemes.py")
    at.session_state["schemes.preset"] = "meta-llama/Llama-3.1-8B"
    at.session_state["schemes.compare"] = True
    at.session_state["schemes.compare.kind"] = "File"
    at.run()
    at.get("file_uploader")[0].set_value(("llama.gguf", gguf.read_bytes(), "x")).run()
    assert not at.exception, at.exception
    for name in ("scheme_diff_pairs.json", "scheme_diff_pairs.csv", "scheme_diff.json"):
        export = tmp_path / name
        export.write_text(downloads[name]())
        code, out = rerun(capsys, export)
        assert code == 0, out
        assert "DIFFERS" not in out
    data = json.loads((tmp_path / "scheme_diff_pairs.json").read_text())
    assert data["analysis"] == "scheme_diff"
    assert [p["config"] for p in data["provenance"]] == [
        "preset:meta-llama/Llama-3.1-8B",
        "llama.gguf",
    ]
    data["columns"]["inv_freq_b"][3] *= 1.5
    assert [c.name for c in posviz.rerun(data, base=tmp_path).differing] == ["inv_freq_b[3]"]
