"""posviz.collection.gather: what a collection asks for, sized from headers and checked against
the count and byte budgets before any table loads; shared-folder and Hub requests, the
editor's relabelling, the seeded example run."""

from __future__ import annotations

import numpy as np
import pytest

from posviz import simulate
from posviz.collection import Member, Step, gather, parse_step
from posviz.embedding import Embedding, LoadError


def table(label: str, seed: int = 0, n: int = 64, d: int = 16) -> Member:
    return Member(label, simulate.learned_like(n, d, seed=seed))


def counted(label: str, nbytes: int, calls: list[str]) -> gather.Request:
    def load() -> Embedding:
        calls.append(label)
        return simulate.learned_like(16, 4, seed=len(calls))

    return gather.Request(label, nbytes, load)


def test_a_request_over_the_count_or_a_byte_budget_loads_nothing():
    calls: list[str] = []
    held = [table("a"), table("b", seed=1)]
    held_bytes = 2 * 64 * 16 * 4
    assert gather.held_bytes(held) == held_bytes
    with pytest.raises(LoadError, match="3 tables asked for, but a collection holds at most 4"):
        gather.gather([counted(f"x{i}", 0, calls) for i in range(3)], held, max_tables=4)
    with pytest.raises(LoadError, match=r"above its budget of 0\.0 MiB"):
        gather.gather([counted("x", 1000, calls)], held, max_bytes=held_bytes + 999)
    with pytest.raises(LoadError, match=r"everyone using this server hold 1\.0 MiB"):
        gather.gather([counted("x", 1, calls)], held, server_bytes=2**20, max_server_bytes=2**20)
    assert calls == []


def test_a_request_at_the_budget_loads_every_table_in_order():
    calls: list[str] = []
    held = [table("run-step300")]
    held_bytes = gather.held_bytes(held)
    requests = [counted("run-step1000", 500, calls), counted("run-step20", 500, calls)]
    members = gather.gather(
        requests,
        held,
        server_bytes=held_bytes,
        max_tables=3,
        max_bytes=held_bytes + 1000,
        max_server_bytes=held_bytes + 1000,
    )
    assert calls == ["run-step1000", "run-step20"]
    assert [m.label for m in members] == ["run-step20", "run-step300", "run-step1000"]


def test_a_table_already_held_under_its_label_is_not_added_twice():
    held = gather.gather(gather.simulation_requests("gaussian", [16], [0, 1], d_model=4))
    again = gather.gather(gather.simulation_requests("gaussian", [16], [1, 2], d_model=4), held)
    assert [m.label for m in again] == [
        "gaussian n=16 seed=0",
        "gaussian n=16 seed=1",
        "gaussian n=16 seed=2",
    ]


def test_simulation_requests_know_their_bytes_before_building():
    requests = gather.simulation_requests("sinusoidal", [16, 32], [0, 1], d_model=8)
    # Sinusoids take no seed (one table per length) and are kept in float64.
    assert [(r.label, r.nbytes) for r in requests] == [
        ("sinusoidal n=16", 16 * 8 * 8),
        ("sinusoidal n=32", 32 * 8 * 8),
    ]
    learned = gather.simulation_requests("learned-like", [16], [0, 1], d_model=8)
    for r in learned:
        assert r.member().table.values.nbytes == r.nbytes == 16 * 8 * 4


@pytest.mark.parametrize(
    ("array", "row_start"),
    [
        (np.ones((20, 6), np.float16), 0),
        (np.ones((20, 6), np.float64), 3),
        (np.ones((1, 20, 6), np.int64), 0),
        (np.ones((20, 6), np.int16), 0),
    ],
)
def test_file_requests_are_sized_from_the_header_as_the_table_will_be_held(
    tmp_path, array, row_start
):
    path = tmp_path / "t.npy"
    np.save(path, array)
    request = gather.file_request("t", path, "t.npy", row_start=row_start)
    m = request.member()
    assert m.error is None
    assert request.nbytes == gather.held_bytes([m])


def test_a_file_without_a_usable_header_is_refused_without_loading(tmp_path):
    path = tmp_path / "junk.npy"
    path.write_bytes(b"junk")
    request = gather.file_request("junk", path, "junk.npy")
    assert request.load is None
    assert request.nbytes == 0
    assert request.member().error.startswith("junk.npy")


def test_a_shared_file_outside_the_folder_is_refused(tmp_path):
    request = gather.shared_request(tmp_path, "../x.npy")
    assert request.load is None
    assert request.label == "../x"


def test_folders_and_matching_files():
    files = ["pythia/run1/step1.npy", "pythia/run1/sub/step2.npy", "pythia/x.csv", "top.npy"]
    assert gather.folders(files) == [".", "pythia", "pythia/run1", "pythia/run1/sub"]
    assert gather.matching(files, "pythia/run1", "step*") == files[:2]
    assert gather.matching(files, ".", "*.csv") == ["pythia/x.csv"]
    with pytest.raises(ValueError, match="at most 200"):
        gather.matching(files, ".", "*" * 201)


def test_stems_and_hub_lines():
    assert gather.stem("run/step1000.safetensors") == "run/step1000"
    assert gather.stem("model.bin") == "model.bin"
    assert gather.hub_lines(" gpt2 \n\nhf:a/b@v", "org/run", "s1, ,s2") == [
        "gpt2",
        "hf:a/b@v",
        "org/run@s1",
        "org/run@s2",
    ]
    assert gather.hub_lines("", " ", "s1") == []
    with pytest.raises(ValueError, match="33 models named; a collection holds at most 32"):
        gather.hub_lines("gpt2", "org/run", ", ".join(f"step{i}" for i in range(32)))


@pytest.mark.parametrize("text", ["1.5", "step-1", "-3", "1e3", "", " , ", "9" * 400, "5, 10000"])
def test_parse_numbers_refuses_what_is_not_a_whole_number_in_bounds(text):
    with pytest.raises(ValueError, match="Positions"):
        gather.parse_numbers(text, "Positions", low=10, high=4096)


def test_parse_numbers():
    assert gather.parse_numbers(" 10, 4096 ,256", "n", low=10, high=4096) == [10, 4096, 256]


def test_the_editor_relabels_and_removes():
    members = [table("a"), table("b", seed=1), table("c", seed=2)]
    kept = gather.edited(members, ["a2", "  ", "c"], [True, True, False])
    assert [m.label for m in kept] == ["a2", "b"]
    assert kept[1].table is members[1].table


def test_the_example_run_is_one_seeded_table_over_training():
    requests = gather.example_run(steps=(100, 10000), n_positions=64, d_model=16)
    assert [r.label for r in requests] == ["simulated-run-step100", "simulated-run-step10000"]
    early, late = (r.member().table.values for r in requests)
    assert [r.nbytes for r in requests] == [early.nbytes, late.nbytes]
    # The same waves (one seed); the noise at step 100 is 10x that at step 10000.
    expected = simulate.learned_like(64, 16, noise=1.0, boundary=4 * 100 / 1100, seed=0).values
    np.testing.assert_array_equal(early, expected)
    assert parse_step(requests[1].label) == Step(10000, "step")
