"""Position probes against analytic truth, a direct numpy reference, and no-information controls."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.dummy import DummyRegressor
from sklearn.linear_model import LinearRegression, RidgeCV
from sklearn.model_selection import KFold, cross_val_predict
from threadpoolctl import threadpool_info, threadpool_limits

from posviz import _ridge, probes, simulate
from posviz._params import defaults


@pytest.mark.slow
def test_sinusoidal_absolute_position_is_exact():
    result = probes.absolute_probe(simulate.sinusoidal_table(512, 768), np.arange(512))
    assert result.mae == 0.0
    assert result.skill == 1.0
    assert result.r2 > 0.9999


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(512, 128), (512, 768)])
def test_gaussian_rows_score_chance(shape):
    rows = simulate.gaussian(*shape, seed=0).values
    result = probes.absolute_probe(rows, np.arange(512))
    # The constant predictor's MAE is ~n/4 for evenly spread positions ...
    assert result.chance_mae == pytest.approx(512 / 4, rel=0.05)
    # ... and a probe of rows without position information matches it, within its spread.
    assert abs(result.skill) <= max(3 * result.skill_sd, 0.01)
    assert abs(result.mae - result.chance_mae) <= 3 * result.mae_sd_folds
    assert result.fold_mae.shape == (2, 5)
    assert result.mae_sd_splits < result.mae_sd_folds


def _planted(n: int, d: int, strength: float, seed: int = 0) -> np.ndarray:
    """Gaussian rows plus `strength` times a random direction per unit of standardised position."""
    rng = np.random.default_rng(seed)
    ramp = (np.arange(n) - (n - 1) / 2) / np.sqrt((n**2 - 1) / 12)
    return rng.standard_normal((n, d)) + strength * np.outer(ramp, rng.standard_normal(d))


@pytest.mark.slow
def test_planted_position_signal_is_found_where_plain_least_squares_interpolates():
    # A hard case: 512 x 384, ~410 training rows per fold, d close to them.
    rows = _planted(512, 384, 0.2)
    nested = probes.absolute_probe(rows, np.arange(512))
    plain = probes.absolute_probe(rows, np.arange(512), protocol="linear")
    assert nested.skill > 0.6
    assert nested.skill - 3 * nested.skill_sd > 0
    assert plain.skill < nested.skill - 0.3  # the unregularised fit amplifies noise
    assert plain.model == "LinearRegression()"
    assert np.all(plain.fold_alpha == 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [(300, 40), (200, 159), (100, 300)],
    ids=["primal", "primal, d = training rows - 1", "dual"],
)
@pytest.mark.parametrize("rows_of", ["table", "planted", "Gaussian"])
def test_nested_ridge_is_sklearns_ridgecv_inside_cross_val_predict(shape, rows_of):
    n, d = shape
    rows = {
        "table": simulate.learned_like(n, d, seed=0).values,
        "planted": _planted(n, d, 0.1),
        "Gaussian": simulate.gaussian(n, d, seed=0).values,
    }[rows_of]
    positions = np.arange(n)
    result = probes.absolute_probe(rows, positions, seed=5, repeats=1)
    scaled = probes._scaled(rows)
    cv = KFold(5, shuffle=True, random_state=5)
    expected = cross_val_predict(RidgeCV(alphas=probes.ALPHAS), scaled, positions, cv=cv)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(result.predictions, expected, rtol=0, atol=1e-8 * scale)
    for fold, (train, test) in enumerate(cv.split(scaled)):
        reference = RidgeCV(alphas=probes.ALPHAS).fit(scaled[train], positions[train])
        ours = result.fold_alpha[0, fold]
        if ours != reference.alpha_:  # a tie to rounding (interpolating strengths, d > n)
            score = RidgeCV(alphas=[ours]).fit(scaled[train], positions[train]).best_score_
            assert score == pytest.approx(reference.best_score_, rel=1e-9)
        mae = np.mean(np.abs(positions[test] - np.round(expected[test])))
        assert result.fold_mae[0, fold] == pytest.approx(mae, abs=1e-12)
        dummy = DummyRegressor().fit(scaled[train], positions[train]).predict(scaled[test])
        chance = np.mean(np.abs(positions[test] - np.round(dummy)))
        assert result.fold_chance_mae[0, fold] == pytest.approx(chance, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(300, 40), (100, 300)], ids=["primal", "dual"])
def test_linear_protocol_is_sklearns_linear_regression(shape):
    rows = simulate.learned_like(*shape, seed=0).values
    positions = np.arange(shape[0])
    result = probes.absolute_probe(rows, positions, seed=2, protocol="linear")
    expected = cross_val_predict(
        LinearRegression(),
        probes._scaled(rows),
        positions,
        cv=KFold(5, shuffle=True, random_state=2),
    )
    np.testing.assert_allclose(result.predictions, expected, rtol=0, atol=1e-6)


def test_unknown_protocol_is_refused():
    with pytest.raises(ValueError, match="nested ridge, linear"):
        probes.absolute_probe(np.eye(20), np.arange(20), protocol="ridge")


@pytest.mark.parametrize("shape", [(300, 40), (100, 300)], ids=["primal", "dual"])
def test_absolute_probes_sharing_rows_equal_separate_probes(shape):
    # The row-shuffled control fits the table's rows against shuffled positions, together
    # with the table's own fit, each with its own strengths.
    rows = simulate.learned_like(*shape, seed=0).values
    positions = np.arange(shape[0])
    shuffled = np.random.default_rng(0).permutation(positions)
    together = probes._absolute_probes(
        rows, [positions, shuffled], folds=5, repeats=2, protocol="nested ridge", seed=1
    )
    for probe, target in zip(together, [positions, shuffled], strict=True):
        alone = probes.absolute_probe(rows, target, seed=1, repeats=2)
        np.testing.assert_allclose(probe.predictions, alone.predictions, rtol=1e-10, atol=1e-8)
        np.testing.assert_array_equal(probe.fold_alpha, alone.fold_alpha)
        np.testing.assert_array_equal(probe.positions, target)


def test_folds_are_sklearns_kfold():
    for n, folds, seed in [(10, 5, 0), (103, 5, 7), (1024, 3, 2**31 - 1)]:
        expected = KFold(folds, shuffle=True, random_state=seed).split(np.zeros(n))
        for (train, test), (train_ref, test_ref) in zip(
            probes._folds(n, folds, seed), expected, strict=True
        ):
            np.testing.assert_array_equal(train, train_ref)
            np.testing.assert_array_equal(test, test_ref)
    with pytest.raises(ValueError, match="at least 10 rows"):
        probes._folds(9, 5, 0)


def test_relative_order_of_a_sinusoidal_table():
    result = probes.relative_probe(simulate.sinusoidal_table(256, 64), np.arange(256), n_pairs=800)
    assert result.error_rate < 0.1
    assert result.n_test_pairs == 5 * 200
    assert result.fold_error_rate.shape == result.fold_C.shape == (5,)
    assert set(result.fold_C) <= set(probes.C_GRID)


def test_relative_probe_cannot_memorise_rows_of_a_wide_gaussian_table():
    # d >= n: one linear score per row could be memorised if test pairs reused training rows.
    rows = np.random.default_rng(1).standard_normal((100, 200))
    result = probes.relative_probe(rows, np.arange(100), n_pairs=800)
    assert abs(result.error_rate - 0.5) <= max(3 * result.error_rate_sd, 0.05)


def test_relative_probe_finds_a_planted_order_and_its_penalty_by_inner_cv(monkeypatch):
    rows = _planted(300, 64, 0.3)
    result = probes.relative_probe(rows, np.arange(300), n_pairs=600)
    assert result.error_rate < 0.25
    assert result.error_rate + 3 * result.error_rate_sd < 0.5
    # The chosen C is the one with the fewest inner validation errors: with every C but one
    # made useless, the inner cross-validation must pick that one.
    fit = _ridge.fit_pair_logistic

    def only_one_c_learns(x, i, j, labels, *, C, **options):
        coef, intercept = fit(x, i, j, labels, C=C, **options)
        return (coef, intercept) if C == 0.1 else (0 * coef, intercept - 10)

    monkeypatch.setattr(_ridge, "fit_pair_logistic", only_one_c_learns)
    assert set(probes.relative_probe(rows, np.arange(300), n_pairs=600).fold_C) == {0.1}


def test_the_relative_probe_finds_the_steep_directions_once_for_all_its_fits(monkeypatch):
    # They depend on the rows alone: passing them to every fit changes no number.
    rows, positions = _planted(120, 16, 0.3), np.arange(120)
    found = []
    steep_directions = _ridge.steep_directions
    monkeypatch.setattr(
        _ridge, "steep_directions", lambda *a: found.append(1) or steep_directions(*a)
    )
    shared = probes.relative_probe(rows, positions, n_pairs=300)
    assert len(found) == 1
    fit = _ridge.fit_pair_logistic

    def finding_its_own(*args, steep, **options):
        return fit(*args, **options)

    monkeypatch.setattr(_ridge, "fit_pair_logistic", finding_its_own)
    alone = probes.relative_probe(rows, positions, n_pairs=300)
    assert len(found) > len(probes.C_GRID)  # each fit found them again
    assert _same(shared, alone)


def test_controls_subsampling_and_seeding():
    values = simulate.sinusoidal_table(1500, 32)
    report = probes.probe_with_controls(values, seed=3, max_rows=300, n_pairs=400)
    assert report.params == {
        "seed": 3,
        "max_rows": 300,
        "folds": 5,
        "repeats": 2,
        "protocol": "nested ridge",
        "n_pairs": 400,
        "n_control_draws": 20,
    }
    assert report.subsampled
    assert report.n_rows == 300
    assert report.n_positions == 1500
    positions = report.absolute["table"].positions
    assert len(np.unique(positions)) == 300
    assert np.all(np.diff(positions) > 0)
    assert positions.max() < 1500
    assert list(report.absolute) == list(probes.CONTROLS)
    shuffled = report.absolute["row-shuffled"].positions
    assert not np.array_equal(shuffled, positions)
    np.testing.assert_array_equal(np.sort(shuffled), positions)
    assert report.absolute["table"].mae < 0.05 * 1500
    for control in ("row-shuffled", "Gaussian"):
        probe = report.absolute[control]
        assert abs(probe.skill) <= max(3 * probe.skill_sd, 0.02)
        assert probe.chance_mae == pytest.approx(report.absolute["table"].chance_mae, rel=0.02)
        assert 0.35 < report.relative[control].error_rate < 0.65
    frame = report.to_frame()
    assert list(frame["table"]) == list(probes.CONTROLS)
    assert (frame["chance_error_rate"] == 0.5).all()
    np.testing.assert_allclose(frame["skill"], 1 - frame["mae"] / frame["chance_mae"], atol=0.05)
    again = probes.probe_with_controls(values, seed=3, max_rows=300, n_pairs=400)
    for name in probes.CONTROLS:
        assert again.absolute[name].mae == report.absolute[name].mae
        assert again.relative[name].error_rate == report.relative[name].error_rate
    other = probes.probe_with_controls(values, seed=4, max_rows=300, n_pairs=400)
    assert not np.array_equal(other.absolute["table"].positions, positions)


def test_the_defaults_are_the_signatures_and_the_procedure_states_them():
    # One default per setting: the probes' own signatures agree with probe_with_controls'.
    constants = defaults(probes.probe_with_controls)
    for function in (probes.absolute_probe, probes.relative_probe):
        for name, value in defaults(function).items():
            assert constants[name] == value, (function, name)
    report = probes.probe_with_controls(
        simulate.sinusoidal_table(300, 16), seed=7, max_rows=100, n_pairs=300
    )
    text = report.procedure()
    assert text.startswith("Seed 7; 5-fold cross-validation on a seeded random subsample of 100")
    assert (
        "of 300 rows, repeated over 2 seeded splits (for the table, ± is the sd over their 10 "
        in text
    )
    assert "Controls over 20 draws each" in text
    assert "central 95% (2.5th to 97.5th percentile over the draws, not over folds)" in text
    assert f"Absolute probe (nested ridge): {probes.PROTOCOLS['nested ridge']}." in text
    assert f"Relative probe: {probes.RELATIVE_PROTOCOL}; 300 training pairs per fold." in text


def test_the_controls_summary_over_draws_covers_chance():
    # The default seed's single Gaussian draw at 512 x 128 scored skill 0.028 ± 0.013 (± over
    # folds): the most extreme of 2,000 seeds. Over 20 draws the central 95% covers 0.
    table = simulate.learned_like(512, 128, seed=0).values
    report = probes.probe_with_controls(table, n_pairs=300)
    assert report.n_control_draws == 20
    for name in ("row-shuffled", "Gaussian"):
        draws = report.control_draws[name]
        assert len(draws) == 20
        mean, low, high = report.control_summary(name)
        skills = [p.skill for p in draws]
        assert mean == pytest.approx(np.mean(skills))
        assert (low, high) == pytest.approx(tuple(np.percentile(skills, [2.5, 97.5])))
        assert low < 0 < high
        assert abs(mean) < 0.02
        row = report.to_frame().set_index("table").loc[name]
        assert row["draws"] == 20
        assert row["skill"] == pytest.approx(mean)
        assert (row["skill_draws_low"], row["skill_draws_high"]) == pytest.approx((low, high))
    # Draws differ: each row shuffle and each Gaussian placement is its own assignment.
    for name in ("row-shuffled", "Gaussian"):
        targets = {tuple(p.positions) for p in report.control_draws[name]}
        assert len(targets) == 20
    assert report.absolute["table"].skill > 0.9
    assert report.params["n_control_draws"] == 20


def test_the_fits_run_on_one_blas_thread(monkeypatch):
    # A second BLAS thread slows the probes' many mid-sized products on a shared machine.
    seen = []
    fit = _ridge.nested_ridge

    def recording(*args, **kwargs):
        seen.extend(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
        return fit(*args, **kwargs)

    monkeypatch.setattr(_ridge, "nested_ridge", recording)
    with threadpool_limits(2, user_api="blas"):
        probes.probe_with_controls(simulate.sinusoidal_table(64, 8), n_pairs=200, n_control_draws=2)
    assert set(seen) == {1}  # (empty if the fits were not reached)


def _same(a: object, b: object) -> bool:
    """Whether two probe results hold the same numbers, bit for bit."""
    return vars(a).keys() == vars(b).keys() and all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
        for x, y in zip(vars(a).values(), vars(b).values(), strict=True)
    )


def test_the_gaussian_control_is_computed_once_per_shape_and_settings():
    settings = {"seed": 5, "max_rows": 150, "n_pairs": 200, "n_control_draws": 3}
    table = simulate.learned_like(200, 24, seed=1).values
    probes._gaussian_control.cache_clear()
    report = probes.probe_with_controls(table, **settings)
    # Another table of the same shape, at another scale: the same Gaussian control, reused.
    other = probes.probe_with_controls(1e3 * simulate.sinusoidal_table(200, 24), **settings)
    assert probes._gaussian_control.cache_info()[:2] == (1, 1)  # (hits, misses)
    kept = report.control_draws["Gaussian"]
    assert all(a is b for a, b in zip(other.control_draws["Gaussian"], kept, strict=True))
    assert other.relative["Gaussian"] is report.relative["Gaussian"]
    assert other.absolute["table"].skill > 0.9 > report.absolute["table"].skill
    # The kept result is what a fresh computation gives, bit for bit, and read-only.
    fresh_draws, fresh_relative = probes._compute_gaussian_control(
        200, 24, folds=5, repeats=2, protocol="nested ridge", **settings
    )
    assert _same(fresh_relative, report.relative["Gaussian"])
    for fresh, draw in zip(fresh_draws, kept, strict=True):
        assert _same(fresh, draw)
        assert not draw.predictions.flags.writeable
    # The table's scale never reaches it: twice the table, the same numbers.
    probes._gaussian_control.cache_clear()
    doubled = probes.probe_with_controls(2 * table, **settings)
    assert _same(doubled.relative["Gaussian"], report.relative["Gaussian"])
    for a, b in zip(doubled.control_draws["Gaussian"], kept, strict=True):
        assert _same(a, b)
    assert probes.GAUSSIAN_REUSE in report.procedure()


def test_the_gaussian_controls_kept_are_bounded():
    probes._gaussian_control.cache_clear()
    table = simulate.gaussian(40, 4, seed=0).values
    for seed in range(probes.GAUSSIAN_CACHE + 2):
        probes.probe_with_controls(table, seed=seed, n_pairs=100, n_control_draws=1)
    info = probes._gaussian_control.cache_info()
    assert info.maxsize == probes.GAUSSIAN_CACHE
    assert info.currsize == probes.GAUSSIAN_CACHE
    assert info.misses == probes.GAUSSIAN_CACHE + 2


_SMALL = {"seed": 2, "max_rows": 60, "n_pairs": 100, "n_control_draws": 3}


def _stored_controls(folder) -> list:
    return sorted((folder / "gaussian-control").glob("*"))


def test_the_gaussian_control_is_kept_on_disk_for_the_next_process(tmp_path, monkeypatch):
    # What a fresh process (a CLI report, a restarted app) finds: the memory empty, the disk not.
    monkeypatch.setenv("POSVIZ_RESULTS_CACHE", str(tmp_path))
    table = simulate.learned_like(80, 12, seed=0).values
    probes._gaussian_control.cache_clear()
    first = probes.probe_with_controls(table, **_SMALL)
    assert len(_stored_controls(tmp_path)) == 1

    def computed_again(*args, **kwargs):
        msg = "the stored Gaussian control was computed again"
        raise AssertionError(msg)

    monkeypatch.setattr(probes, "_compute_gaussian_control", computed_again)
    probes._gaussian_control.cache_clear()
    second = probes.probe_with_controls(table, **_SMALL)
    # Read back bit for bit, read-only like the one kept in memory.
    assert _same(second.relative["Gaussian"], first.relative["Gaussian"])
    for a, b in zip(second.control_draws["Gaussian"], first.control_draws["Gaussian"], strict=True):
        assert _same(a, b)
        assert a.positions.dtype == b.positions.dtype
        assert isinstance(a.r2, float)
        assert not a.predictions.flags.writeable
    assert second.to_frame().equals(first.to_frame())
    # Other settings are another entry: computed, not read.
    with pytest.raises(AssertionError, match="computed again"):
        probes.probe_with_controls(table, **(_SMALL | {"seed": 3}))


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"not a safetensors file",
        lambda data: data[: len(data) // 2],
        # Bytes stored for other settings under this entry's name: the key inside says so.
        lambda data: data.replace(b"'seed', 2", b"'seed', 9"),
    ],
    ids=["garbage", "truncated", "another key"],
)
def test_a_damaged_stored_control_is_computed_again_and_replaced(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("POSVIZ_RESULTS_CACHE", str(tmp_path))
    table = simulate.learned_like(80, 12, seed=0).values
    probes._gaussian_control.cache_clear()
    expected = probes.probe_with_controls(table, **_SMALL).to_frame()
    (entry,) = _stored_controls(tmp_path)
    damaged = damage(entry.read_bytes())
    assert damaged != entry.read_bytes()
    entry.write_bytes(damaged)
    probes._gaussian_control.cache_clear()
    assert probes.probe_with_controls(table, **_SMALL).to_frame().equals(expected)
    # ... and stored whole again, for the next process to read.
    monkeypatch.setattr(probes, "_compute_gaussian_control", None)
    probes._gaussian_control.cache_clear()
    assert probes.probe_with_controls(table, **_SMALL).to_frame().equals(expected)


def test_no_folder_or_an_unwritable_one_only_costs_the_computation(tmp_path, monkeypatch):
    table = simulate.learned_like(80, 12, seed=0).values
    monkeypatch.setenv("POSVIZ_RESULTS_CACHE", "off")
    probes._gaussian_control.cache_clear()
    expected = probes.probe_with_controls(table, **_SMALL).to_frame()
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv("POSVIZ_RESULTS_CACHE", str(blocked))
    probes._gaussian_control.cache_clear()
    assert probes.probe_with_controls(table, **_SMALL).to_frame().equals(expected)
    assert blocked.read_text() == ""


def test_the_controls_kept_on_disk_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("POSVIZ_RESULTS_CACHE", str(tmp_path))
    table = simulate.gaussian(40, 4, seed=0).values
    probes._gaussian_control.cache_clear()
    probes.probe_with_controls(table, seed=0, n_pairs=100, n_control_draws=1)
    (entry,) = _stored_controls(tmp_path)
    # Room for two entries: the third stored pushes out the least recently used.
    monkeypatch.setattr(probes, "RESULTS_CACHE_BYTES", 2 * entry.stat().st_size + 100)
    for seed in (1, 2):
        probes.probe_with_controls(table, seed=seed, n_pairs=100, n_control_draws=1)
    kept = _stored_controls(tmp_path)
    assert len(kept) == 2
    assert entry not in kept
    assert sum(f.stat().st_size for f in kept) <= probes.RESULTS_CACHE_BYTES


def test_the_parts_run_two_at_a_time_give_what_each_gives_alone():
    values = simulate.learned_like(120, 16, seed=2).values
    settings = {"folds": 5, "seed": 4}
    report = probes.probe_with_controls(values, n_pairs=200, n_control_draws=2, **settings)
    positions, shuffles, _, seed = probes._draws(120, 4, 2048, 2)
    options = {"folds": 5, "seed": seed}
    with threadpool_limits(1, user_api="blas"):
        absolute = probes._absolute_probes(
            values, [positions, *shuffles], repeats=2, protocol="nested ridge", **options
        )
        relative = [
            probes.relative_probe(values, target, n_pairs=200, **options)
            for target in (positions, shuffles[0])
        ]
    assert _same(absolute[0], report.absolute["table"])
    for alone, together in zip(absolute[1:], report.control_draws["row-shuffled"], strict=True):
        assert _same(alone, together)
    assert _same(relative[0], report.relative["table"])
    assert _same(relative[1], report.relative["row-shuffled"])
