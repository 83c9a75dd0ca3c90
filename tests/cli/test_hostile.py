"""Issue 45 through the command: GGUF metadata and rope tensors, heads configs, a diff at
positions no float can tell apart, a rerun of an edited export, names holding escape codes.
Every refusal is one line and exit 2 (`tests.refusals.refused`), with the memory it took
bounded; the inputs are tests/hostile.py's, the small ones as committed in tests/data/hostile."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from posviz.cli import main
from tests import hostile
from tests.refusals import refused

GGUF = hostile.HOSTILE / "gguf"
LLAMA = "preset:meta-llama/Llama-3.1-8B"


def test_the_committed_inputs_are_the_scripts(tmp_path: Path) -> None:
    hostile.write_small(tmp_path)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    kept = sorted(p.relative_to(hostile.HOSTILE) for p in hostile.HOSTILE.rglob("*") if p.is_file())
    assert made == kept
    for name in made:
        assert (tmp_path / name).read_bytes() == (hostile.HOSTILE / name).read_bytes(), name


@pytest.mark.parametrize("name", list(hostile.GGUF_METADATA))
def test_gguf_metadata_is_refused_by_its_key(capsys, name: str) -> None:
    # Before: ZeroDivisionError (key_length 0, embedding below the heads, 10**9 heads), int()
    # of NaN or inf, or 1 rope factor for 64 pairs read as a llama3 rule.
    path = str(GGUF / f"{name}.gguf")
    says = hostile.GGUF_METADATA[name][1]
    assert says in refused(capsys, "summary", path)
    assert says in refused(capsys, "diff", LLAMA, path)


def test_gguf_metadata_by_name_is_refused_the_same_way(capsys, fake_hub) -> None:
    for name, (_, says) in hostile.GGUF_METADATA.items():
        fake_hub.add(f"test/{name}-GGUF", {"model-Q8_0.gguf": GGUF / f"{name}.gguf"})
        assert says in refused(capsys, "summary", f"hf:test/{name}-GGUF")


def test_a_rerun_of_an_export_naming_such_a_gguf_is_refused(tmp_path: Path, capsys) -> None:
    path = GGUF / "original_context_nan.gguf"
    export = {"analysis": "scheme_record", "params": {}, "scheme": "rotary",
              "provenance": {"config": str(path), "sha256": "0" * 64}}  # fmt: skip
    (tmp_path / "e.json").write_text(json.dumps(export))
    assert "original_context_length is nan" in refused(capsys, "rerun", str(tmp_path / "e.json"))


# --- rope tensors: their length checked from the header, before a byte of them is read ------


@pytest.fixture(scope="module")
def big_rope(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """64 MiB of rope_freqs, and 32 MiB each of LongRoPE's long and short factors."""
    folder = tmp_path_factory.mktemp("rope")
    return {
        "rope_freqs": hostile.rope_tensor_gguf(folder / "rope_freqs.gguf", 2**24),
        "longrope": hostile.rope_tensor_gguf(folder / "longrope.gguf", 2**23, longrope=True),
    }


def peak_of(capsys, *argv: str) -> tuple[str, int]:
    """`refused(argv)`'s line and the peak memory it took (tracemalloc, numpy included)."""
    tracemalloc.start()
    try:
        line = refused(capsys, *argv)
        return line, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


ROPE_SAYS = {
    "rope_freqs": "rope_freqs.weight holds 16,777,216 values; the rotary width 128 gives 64 pairs",
    "longrope": "rope_factors_long.weight holds 8,388,608 values; the rotary width 96 gives 48",
}


@pytest.mark.parametrize("kind", list(ROPE_SAYS))
def test_a_rope_tensor_of_the_wrong_length_is_refused_unread(
    tmp_path: Path, capsys, big_rope, kind: str
) -> None:
    # Before: the tensor became a Python list first: a 64 MiB file peaked at 1.6 GB.
    path = str(big_rope[kind])
    for argv in (("summary", path), ("diff", LLAMA, path)):
        line, peak = peak_of(capsys, *argv)
        assert ROPE_SAYS[kind] in line
        assert peak < 8 * 2**20, f"{argv[0]}: {peak / 2**20:.0f} MiB"
    # rerun: refused as the GGUF is read again, before its sha256 (of the header and these
    # tensors) could be checked.
    export = {"analysis": "scheme_record", "params": {},
              "provenance": {"config": path, "sha256": "0" * 64}}  # fmt: skip
    (tmp_path / "e.json").write_text(json.dumps(export))
    line, peak = peak_of(capsys, "rerun", str(tmp_path / "e.json"))
    assert ROPE_SAYS[kind] in line
    assert peak < 8 * 2**20, f"rerun: {peak / 2**20:.0f} MiB"


def test_a_rope_tensor_of_the_wrong_length_on_the_hub_is_not_fetched(capsys, fake_hub, big_rope):
    fake_hub.add("test/big-rope-GGUF", {"model-Q8_0.gguf": big_rope["rope_freqs"]})
    line, peak = peak_of(capsys, "summary", "hf:test/big-rope-GGUF")
    assert ROPE_SAYS["rope_freqs"] in line
    assert peak < 8 * 2**20
    assert fake_hub.bytes_sent() < 2**17  # the revision's answer and the header: no tensor
    assert main(["summary", "hf:test/big-rope-GGUF"]) == 2  # asked again: refused again


# --- heads: a config of the wrong type or size, weights holding NaN -------------------------


@pytest.mark.parametrize("case", list(hostile.HEADS_CONFIGS))
def test_a_heads_config_of_the_wrong_type_or_size_is_refused(tmp_path: Path, capsys, case):
    # Before: 12 tracebacks (int("abc"), float([..]), a reshape of 3 heads of 10 columns from
    # 32), a negative pad_token_id read as the table's last rows, and attention_types repeated
    # 10**8 times made into a list of 200 million names (3.1 GB).
    family, changes, says = hostile.HEADS_CONFIGS[case]
    path = hostile.heads_checkpoint(tmp_path / case, family, changes)
    line, peak = peak_of(capsys, "heads", str(path))
    assert says in line
    assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    ("family", "tensor", "value"),
    [("gpt2", "h.0.attn.c_attn.weight", float("nan")), ("gpt2", "h.0.ln_1.weight", float("inf")),
     ("mistral", "0.self_attn.k_proj.weight", float("nan"))],
    ids=["nan-weight", "inf-norm", "nan-rotary"],
)  # fmt: skip
def test_weights_holding_nan_or_inf_are_refused_by_name(
    tmp_path: Path, capsys, family, tensor, value
):
    # Before: exit 0, every number null, and a RuntimeWarning.
    path = hostile.poisoned_checkpoint(tmp_path / family, family, tensor, value)
    line = refused(capsys, "heads", str(path), told=1)  # after the bytes it reads are said
    assert f"{tensor} holds {'NaN' if value != value else 'infinite'} values" in line


def test_heads_sized_past_the_budget_are_refused_before_the_weights_are_read(
    tmp_path: Path, capsys
) -> None:
    # Before: 1,024 heads of width 1 over 2,048 positions took 44-77 s and 680-720 MB (3 min
    # 43 s and 710 MB on this machine under load), and the printed kernels were checked last.
    path = hostile.wide_heads_checkpoint(tmp_path / "wide")
    line, peak = peak_of(capsys, "heads", str(path))
    assert "1,024 heads over 2,048 positions" in line
    assert "n_positions" in line
    assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB"  # the 21 MB of weights are not read


# --- diff: positions where angles cannot be told apart ------------------------------------------


def cos_sin_dump(path: Path, scale: float) -> str:
    """A half-split cos/sin table of 64 rows whose frequencies are Llama-3.1's times `scale`."""
    from posviz.schemes.config import position_scheme
    from posviz.schemes.presets import PRESETS
    from posviz.schemes.rotary import rotary_frequencies

    spec = position_scheme(PRESETS["meta-llama/Llama-3.1-8B"]).rotary[0]
    inv_freq = rotary_frequencies(spec).inv_freq * scale
    angles = np.outer(np.arange(64), inv_freq)
    np.save(path, np.concatenate([np.cos(angles), np.sin(angles)], axis=1))
    return str(path)


@pytest.mark.parametrize(
    ("first", "says"),
    [
        # Before: "agree", while the frequencies differ by 0.75 relative: the angle tolerance
        # grows with m·θ, and at 10**18 (or 2**31) it passes any angle.
        (2**31, "a relative tolerance of 1e-06 lets angles differ by π or more"),
        (10**7, "Compare positions below 3,141,593"),
        (10**18, "first_position is 1000000000000000000; it must be a whole number from 0 to"),
        (10**30, "first_position is 1000000000000000000000000000000; it must be"),  # overflowed
    ],
    ids=["2**31", "1e7", "1e18", "1e30"],
)
def test_a_diff_at_positions_where_angles_carry_no_precision_is_refused(
    tmp_path: Path, capsys, first: int, says: str
) -> None:
    dump = cos_sin_dump(tmp_path / "cos_sin.npy", 0.25)
    line = refused(capsys, "diff", LLAMA, dump, "--first-position-b", str(first))
    assert says in line
    # At its own positions the same dump differs, as it does.
    assert main(["diff", LLAMA, dump]) == 1
    capsys.readouterr()


# --- rerun: what was read again, said as read ----------------------------------------------


def rerun_of(capsys, tmp_path: Path, record: dict) -> tuple[int, str, str]:
    (tmp_path / "edited.json").write_text(json.dumps(record))
    code = main(["rerun", str(tmp_path / "edited.json")])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_rerun_names_the_config_it_read_not_the_one_the_export_names(tmp_path: Path, capsys):
    # Before: "recomputed exactly from /proc/self/environ" when it read the config.json beside
    # the weights the export also names.
    path = hostile.heads_checkpoint(tmp_path / "m", "mistral", {})
    assert main(["summary", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["provenance"]["config"] == str(tmp_path / "m" / "config.json")
    record["provenance"]["config"] = "/proc/self/environ"
    code, out, _ = rerun_of(capsys, tmp_path, record)
    assert code == 0
    assert "/proc/self/environ" not in out
    assert out.splitlines()[-1].endswith(
        f"recomputed exactly from {tmp_path / 'm' / 'config.json'}"
    )


def test_hand_edited_gguf_keys_do_not_pass_as_exact(tmp_path: Path, capsys) -> None:
    from tests import ggufs

    path = ggufs.llama31(tmp_path / "llama.gguf")
    assert main(["summary", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    (theta,) = [k for k in record["provenance"]["gguf_keys"] if k["config"] == "rope_theta"]
    theta["value"] = 10000.0  # what the export claims was read; the file says 500000
    code, out, err = rerun_of(capsys, tmp_path, record)
    assert code == 2, out
    assert "llama.rope.freq_base" in err
    assert "not the keys read from" in err


# --- names holding escape codes ----------------------------------------------------------------

ESCAPES = ("\x1b", "\x07", "\x9b", "\u202e")


def test_escape_codes_in_a_tensor_name_are_printed_escaped(tmp_path: Path, capsys) -> None:
    # Before: the name's codes reached the terminal as they are (clear the screen, set its
    # title, ring the bell).
    path = str(hostile.escaped_name_checkpoint(tmp_path / "esc.safetensors"))
    assert main(["summary", path]) == 0
    out = capsys.readouterr().out
    assert not any(code in out for code in ESCAPES)
    assert r"wpe\x1b[2J\x1b]0;owned\x07" in out
    line = refused(capsys, "summary", path, "--tensor", "missing")
    assert not any(code in line for code in ESCAPES)
    assert r"\x1b[2J" in line


def test_escape_codes_in_a_hub_answer_are_printed_escaped(capsys, fake_hub) -> None:
    fake_hub.add("test/esc-GGUF", {"m\x1b[2J\u202e-Q8_0.gguf": b"GGUF"})
    line = refused(capsys, "summary", "hf:test/esc-GGUF:other.gguf")
    assert not any(code in line for code in ESCAPES)
    assert r"m\x1b[2J\u202e-Q8_0.gguf" in line


def test_gguf_metadata_is_refused_by_heads_too(capsys) -> None:
    for name, (_, says) in hostile.GGUF_METADATA.items():
        assert says in refused(capsys, "heads", str(GGUF / f"{name}.gguf"))


def test_the_reports_heads_section_says_why_when_the_work_is_past_the_budget(tmp_path: Path):
    from posviz.models import weights
    from posviz.report import heads_section

    model = weights.open_checkpoint(hostile.wide_heads_checkpoint(tmp_path / "wide"))
    section = heads_section(model)
    assert "No per-head view" in section.note
    assert "1,024 heads over 2,048 positions" in section.note
