"""posviz.collection: step parsing and ordering, refusals, CKA map, metrics equal the pages'."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from pandas.testing import assert_frame_equal
from scipy.stats import ortho_group

from posviz import boundary, collection, compare, components, offsets, simulate, spectrum
from posviz.cli import main
from posviz.collection import Member, Step, analyse, member, order, parse_step
from posviz.embedding import Embedding, LoadError


@pytest.mark.parametrize(
    ("label", "step"),
    [
        ("step1000", Step(1000, "step")),
        ("checkpoint-2000", Step(2000, "step")),
        ("global_step300", Step(300, "step")),
        ("global_step_300", Step(300, "step")),
        ("epoch3", Step(3, "epoch")),
        ("pythia-160m-1k", Step(1000, "step")),
        ("run_2.5k", Step(2500, "step")),
        ("step0200", Step(200, "step")),
        ("checkpoint-00200.safetensors", Step(200, "step")),
        ("model-step1.5k-final", Step(1500, "step")),
        ("ckpt_3M", Step(3_000_000, "step")),
        ("run3-step200", Step(200, "step")),
        ("EleutherAI/pythia-70m@step143000", Step(143000, "step")),
        ("opt-125m", None),
        ("pythia-70m", None),
        ("gpt2", None),
        ("stepper", None),
        ("bert-base-uncased", None),
        # Whole numbers, exact and bounded; a minus sign is not a separator after step.
        ("step-1", None),
        ("step-1k", None),
        ("epoch-2", None),
        ("checkpoint-1", Step(1, "step")),
        ("step" + "9" * 400, None),
        ("step1000000000000000", Step(10**15, "step")),
        ("step1000000000000001", None),
        ("step9007199254740993", None),
        ("ckpt_0.1k", Step(100, "step")),
        ("epoch0.5", Step(0.5, "epoch")),
    ],
)
def test_parse_step(label, step):
    assert parse_step(label) == step


def table(label: str, seed: int = 0, n: int = 64, d: int = 16) -> Member:
    return Member(label, simulate.learned_like(n, d, seed=seed))


def test_order_is_numeric_across_zero_padding_and_suffixes():
    labels = ["step1000", "step0200", "step_3k", "step50.npy", "step00010-final", "step2000"]
    members = [table(label, seed=i) for i, label in enumerate(labels)]
    ordered = order(members)
    assert [m.label for m in ordered] == [
        "step00010-final",
        "step50.npy",
        "step0200",
        "step1000",
        "step2000",
        "step_3k",
    ]


def test_a_set_of_models_keeps_the_given_order():
    labels = ["gpt2", "bert-base", "opt-125m"]
    members = [table(label) for label in labels]
    assert [m.label for m in order(members)] == labels
    assert not collection.is_ordered(members)


def test_mixed_units_or_a_missing_step_are_not_ordered():
    assert not collection.is_ordered([table("step10"), table("epoch2")])
    assert not collection.is_ordered([table("step10"), table("final")])


def test_refused_members_are_listed_and_do_not_sink_the_rest():
    def refuse() -> Embedding:
        msg = "bad.npy: file is truncated; re-export it."
        raise LoadError(msg)

    members = [
        member("step300", lambda: simulate.learned_like(64, 16, seed=3)),
        member("broken", refuse),
        member("step100", lambda: simulate.learned_like(64, 16, seed=1)),
        member("step200", lambda: simulate.learned_like(40, 8, seed=2)),
    ]
    result = analyse(members)
    assert result.ordered
    assert [m.label for m in result.members] == ["step100", "step200", "step300", "broken"]
    records = result.records()
    assert records[3]["error"] == "bad.npy: file is truncated; re-export it."
    assert records[3]["step"] is None
    assert records[3]["k90"] is None
    assert [r["step"] for r in records[:3]] == [100, 200, 300]
    assert all(r["error"] is None for r in records[:3])
    assert result.cka.shape == (3, 3)
    assert result.coordinates.shape == (3, 2)
    assert result.common_positions == 40
    frame = result.to_frame()
    assert frame["n_positions"].tolist()[:3] == [64, 40, 64]
    assert frame["d_model"].tolist()[:3] == [16, 8, 16]
    assert frame.iloc[3].drop(["label", "error"]).isna().all()
    assert result.nbytes == (64 * 16 * 2 + 40 * 8) * 4
    header = result.header()
    assert header["collection"]["ordered_by"] == "step"
    assert (header["analysis"], header["params"]) == ("table_summary", {"center": True})
    assert [p["label"] for p in header["provenance"]] == [m.label for m in result.members]


def test_repeated_labels_are_numbered():
    result = analyse([table("gpt2", seed=1), table("gpt2", seed=2), table("bert")])
    assert [m.label for m in result.members] == ["gpt2", "gpt2 (2)", "bert"]


def test_nothing_loaded_is_refused_with_every_reason():
    with pytest.raises(LoadError, match="a: nope"):
        analyse([Member("a", error="nope")])


def test_too_many_tables_are_refused():
    with pytest.raises(LoadError, match="at most 32"):
        analyse([Member(f"t{i}", error="x") for i in range(33)])


def test_metrics_equal_the_single_table_core_results():
    tables = [
        simulate.learned_like(200, 48, seed=4),
        simulate.sinusoidal(150, 64),
        simulate.gaussian(30, 100, seed=2),  # wide: fewer positions than dimensions
    ]
    result = analyse([Member(f"m{i}", t) for i, t in enumerate(tables)])
    for t, record in zip(tables, result.records(), strict=True):
        x = t.values
        n = len(x)
        expected = spectrum.spectrum(x, center=True).metrics()
        assert {k: record[k] for k in expected} == expected
        profile = offsets.offset_profile(
            x, metric="cosine", center=True, max_offset=min(n - 1, 1024)
        )
        below = [k for k in range(1, n) if profile.mean[k] < 1 / math.e]
        assert record["similarity_length"] == (below[0] if below else None)
        assert record["translation_invariance"] == profile.translation_invariance
        stats = boundary.position_statistics(x)
        median = np.median(stats.norm)
        assert record["first_norm_ratio"] == stats.norm[0] / median
        assert record["last_norm_ratio"] == stats.norm[-1] / median
        assert record["first_neighbour_cos"] == stats.cos_next[0]
        assert record["last_neighbour_cos"] == stats.cos_prev[-1]
        k = min(6, components.max_components(x.shape, center=True))
        pcs = components.principal_components(x, n_components=k, center=True)
        likeness = components.sinusoid_likeness(pcs, n_frequencies=min(8, n // 2))
        assert record["sinusoid_mean_cos2"] == likeness.mean_cos2
        assert record["shuffled_mean_cos2"] == likeness.shuffled.mean()
        assert record["sinusoid_p_value"] == likeness.p_value


def test_the_sinusoidal_table_is_sinusoid_like_and_the_gaussian_is_not():
    result = analyse(
        [Member("sin", simulate.sinusoidal(256, 64)), Member("noise", simulate.gaussian(256, 64))]
    )
    sin, noise = result.records()
    assert sin["sinusoid_p_value"] == pytest.approx(1 / 1000)  # none of 999 shuffles
    assert noise["sinusoid_p_value"] > 0.05
    assert noise["similarity_length"] == 1  # independent rows: similarity ~0 at offset 1


def test_cka_of_identical_and_rotated_tables_is_one_and_their_distance_zero():
    x = simulate.learned_like(96, 24, seed=5).values
    rotation = ortho_group.rvs(24, random_state=1)
    rotated = (x.astype(np.float64) @ rotation).astype(np.float32)
    other = simulate.gaussian(96, 24, seed=9).values
    cka = collection.cka_matrix([x, x, rotated, other])
    np.testing.assert_allclose(cka[:3, :3], 1.0, atol=1e-6)
    assert cka[0, 3] < 0.5
    result = analyse(
        [
            Member("a", _wrap(x)),
            Member("b", _wrap(x)),
            Member("r", _wrap(rotated)),
            Member("g", _wrap(other)),
        ]
    )
    xy = result.coordinates
    assert np.linalg.norm(xy[0] - xy[1]) < 1e-6
    assert np.linalg.norm(xy[0] - xy[2]) < 2e-3  # sqrt of the float32 rounding of the rotation
    assert np.linalg.norm(xy[0] - xy[3]) > 0.5
    assert result.map_share == pytest.approx(1.0)  # two distinct points: exact in 2-D


def _wrap(x: np.ndarray) -> Embedding:
    return Embedding.from_array(x, name="t", source="test")


def test_cka_matrix_equals_compare_linear_cka_on_the_common_positions():
    tables = [
        simulate.learned_like(120, 32, seed=1).values,
        simulate.sinusoidal(100, 48).values,
        simulate.gaussian(130, 8, seed=3).values,
        simulate.learned_like(100, 200, seed=2).values,  # wide
    ]
    for center in (True, False):
        cka = collection.cka_matrix(tables, center=center)
        for i, x in enumerate(tables):
            for j, y in enumerate(tables):
                expected = compare.linear_cka(x[:100], y[:100], center=center)
                assert cka[i, j] == pytest.approx(expected, abs=1e-12)


def test_classical_mds_recovers_planar_points():
    points = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [1.0, 1.0]])
    distances = np.linalg.norm(points[:, None] - points[None], axis=2)
    xy, share = collection.classical_mds(distances)
    assert share == pytest.approx(1.0)
    np.testing.assert_allclose(np.linalg.norm(xy[:, None] - xy[None], axis=2), distances)


# --- command line ---------------------------------------------------------------------------


@pytest.fixture
def checkpoints(tmp_path):
    """Three checkpoints named by step (one zero-padded) and one corrupt file."""
    paths = {}
    for step, seed in (("step1000", 1), ("step0200", 2), ("step30k", 3)):
        paths[step] = tmp_path / f"{step}.npy"
        np.save(paths[step], simulate.learned_like(128, 32, seed=seed).values)
    paths["bad"] = tmp_path / "bad.npy"
    paths["bad"].write_bytes(b"garbage")
    return paths


def test_summary_of_many_paths_is_a_json_array_in_step_order(checkpoints, capsys):
    paths = [str(checkpoints[k]) for k in ("step1000", "bad", "step30k", "step0200")]
    assert main(["summary", *paths, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["analysis"], printed["params"]) == ("table_summary", {"center": True})
    records = printed["records"]
    assert [p.get("sha256") is not None for p in printed["provenance"]] == [True] * 3 + [False]
    assert [r["step"] for r in records] == [200, 1000, 30000, None]
    assert [r["label"] for r in records] == [paths[3], paths[0], paths[2], paths[1]]
    assert records[3]["error"].startswith("bad.npy could not be read as npy")
    assert records[3]["k90"] is None
    for record in records[:3]:
        assert record["error"] is None
        values = np.load(record["label"])
        s = spectrum.spectrum(values, center=True)
        assert {k: record[k] for k in s.metrics()} == s.metrics()
        assert record["singular_values"] == s.singular_values[:10].tolist()
        assert record["shape"] == [128, 32]
        assert record["dtype"] == "float32"


def test_summary_text_of_many_paths_says_what_is_missing_in_words(checkpoints, capsys):
    # Formerly: "step None" for a label without a step, "NaN" for what a flat table lacks,
    # and counts printed as 5.0.
    flat = checkpoints["bad"].with_name("flat.npy")
    np.save(flat, np.ones((32, 8), dtype=np.float32))
    assert main(["summary", str(checkpoints["step1000"]), str(flat)]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\b(None|NaN|nan)\b", out), out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert rows["step"] == ["1,000", "-"]
    assert rows["k90"][1] == "undefined"
    assert rows["k90"][0].isdigit()
    assert out.rstrip().endswith(f"undefined: {spectrum.NO_VARIANCE}")


def test_summary_exits_2_when_nothing_loads(checkpoints, capsys):
    assert main(["summary", str(checkpoints["bad"]), str(checkpoints["bad"])]) == 2
    assert "No table of the collection could be loaded" in capsys.readouterr().err


def test_collection_report_lists_the_tables_and_draws_every_chart(checkpoints, tmp_path):
    out = tmp_path / "collection.html"
    paths = [str(checkpoints[k]) for k in ("step1000", "step0200", "step30k", "bad")]
    assert main(["report", *paths, "-o", str(out)]) == 0
    page = out.read_text()
    data = json.loads(page.split('type="application/json">')[1].split("</script>")[0])
    settings = data["collection"]
    assert settings["ordered_by"] == "step"
    assert settings["cka"].startswith(
        "classic (biased) linear CKA, Kornblith et al. 2019, on the common first 128 positions "
        "(each table mean-centred over them)"
    )
    assert "refused: " in page
    for title in (
        "Metrics over training",
        "Cumulative explained variance",
        "Mean cosine similarity against offset",
        "Cosine similarity between positions",
        "Tables by classic (biased) linear CKA",
    ):
        assert title in page


def test_tables_of_the_loaded_members_and_their_cka():
    members = [
        Member("step2", simulate.learned_like(64, 16, seed=2)),
        Member("broken", error="bad.npy: truncated"),
        Member("step1", simulate.learned_like(48, 16, seed=1)),
    ]
    result = analyse(members)
    loaded = result.to_frame(refused=False)
    assert loaded["label"].tolist() == ["step1", "step2"]
    assert "error" not in loaded.columns
    assert loaded["step"].tolist() == [1, 2]  # whole numbers stay whole without refused rows
    assert loaded["k90"].dtype == np.int64
    full = result.to_frame()
    assert_frame_equal(loaded, full.iloc[:2].drop(columns="error"), check_dtype=False)
    pairs = result.cka_table()
    assert list(pairs.columns) == ["table", "step1", "step2"]
    assert pairs["table"].tolist() == ["step1", "step2"]
    np.testing.assert_array_equal(pairs[["step1", "step2"]].to_numpy(), result.cka)


def test_members_table_describes_each_member():
    members = [
        Member("ckpt-step20", simulate.learned_like(64, 16, seed=2)),
        Member("x", error="no"),
    ]
    frame = collection.members_table(members)
    assert frame["label"].tolist() == ["ckpt-step20", "x"]
    assert frame["keep"].tolist() == [True, True]
    assert frame["step"].tolist() == ["20", "-"]
    assert frame["table"].tolist() == ["learned_like 64 x 16 (float32)", ""]
    assert frame["status"].tolist() == ["loaded", "refused: no"]


def test_describe_says_how_many_tables_and_whether_ordered():
    ordered = analyse([table("step2"), table("step1"), Member("x", error="no")])
    assert ordered.describe() == "2 tables, ordered by step"
    assert analyse([table("gpt2"), table("bert")]).describe() == "2 tables, a set of models"


def test_summary_of_a_label_is_that_tables_summary():
    result = analyse([table("step2"), Member("x", error="no"), table("step1")])
    assert result.summary("step2") is result.summaries[1]
    assert result.summary("step1") is result.summaries[0]


def test_shown_table_writes_a_dash_for_no_step_and_the_export_keeps_null():
    result = analyse([table("gpt2"), table("step5", seed=1)])
    assert result.shown_table()["step"].tolist() == ["-", "5"]
    assert result.to_frame()["step"].isna().tolist() == [True, False]


def test_the_digest_follows_labels_tables_and_centring():
    a, b = table("a"), table("b", seed=1)
    digest = analyse([a, b]).digest
    assert analyse([a, b]).digest == digest
    assert analyse([a, Member("c", b.table)]).digest != digest
    assert analyse([a, b], center=False).digest != digest
