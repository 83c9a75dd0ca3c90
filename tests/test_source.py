"""A source is parsed once from text and printed back by str(): every kind round-trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from posviz.source import (
    HubRef,
    LoadError,
    LocalPath,
    Preset,
    SharedFile,
    Shipped,
    Simulation,
    Source,
    Upload,
    as_source,
    parse_source,
)

SOURCES = [
    LocalPath("model.safetensors"),
    LocalPath("/data/runs/step1000"),
    LocalPath("hf:a file named like a reference.npy"),
    LocalPath("file:twice"),
    SharedFile("gpt2/model.safetensors"),
    Upload("wpe.npy"),
    HubRef("gpt2"),
    HubRef("EleutherAI/pythia-70m", "step3000"),
    HubRef("acme/Llama-GGUF", "a" * 40, "model-Q4_K_M.gguf"),
    HubRef("acme/Llama-GGUF", "refs/pr/1", "Q8_0"),
    Preset("meta-llama/Llama-3.1-8B"),
    Shipped("planted-gpt2"),
    Shipped("all-MiniLM-L6-v2/config.json"),
    Simulation("learned_like", (("n_positions", 1024), ("d_model", 768), ("seed", 0))),
    Simulation("sinusoidal", (("n_positions", 64), ("d_model", 8), ("base", 10000.0))),
    Simulation("gaussian"),
]


@pytest.mark.parametrize("source", SOURCES, ids=str)
def test_every_kind_is_printed_as_the_text_it_is_parsed_from(source):
    assert parse_source(str(source)) == source
    assert Source.parse(str(source)) == source
    assert isinstance(source, Source)


def test_a_hub_reference_is_written_as_users_write_it_and_pinned_by_at():
    assert parse_source("hf://EleutherAI/pythia-70m@step3000") == HubRef(
        "EleutherAI/pythia-70m", "step3000"
    )
    assert str(parse_source("hf:gpt2")) == "hf:gpt2@main"
    assert HubRef("org/m", "main", "Q8_0").at("b" * 40) == HubRef("org/m", "b" * 40, "Q8_0")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hf:https://evil.example/x", "is not a model id"),
        ("hf:org/../x", "is not a model id"),
        ("hf:gpt2@../main", "is not a revision"),
        ("hf:org/m:../x.gguf", "is not a GGUF file of the repo"),
        ("preset:", "names no known model"),
        ("shared:", "names no file of the shared folder"),
        ("sim:gaussian?n_positions=many", "is not an argument of a simulation"),
        ("sim:gaussian?=3", "is not an argument of a simulation"),
    ],
)
def test_text_that_names_no_source_is_refused_with_what_to_write(text, message):
    with pytest.raises(LoadError, match=message):
        parse_source(text)


def test_an_uploads_bytes_travel_with_it_but_are_not_its_identity():
    upload = Upload("wpe.npy", b"\x93NUMPY...")
    assert upload == Upload("wpe.npy")
    assert upload.data == b"\x93NUMPY..."
    assert "NUMPY" not in repr(upload)
    assert str(upload) == "upload:wpe.npy"


def test_paths_and_sources_are_taken_as_they_are():
    assert as_source(Path("runs/wpe.npy")) == LocalPath("runs/wpe.npy")
    assert as_source("hf:gpt2") == HubRef("gpt2")
    ref = HubRef("gpt2")
    assert as_source(ref) is ref
    assert parse_source("C:\\tables\\wpe.npy") == LocalPath("C:\\tables\\wpe.npy")
