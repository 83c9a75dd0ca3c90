"""How do many position tables differ: a model zoo side by side, or one model over training.

A collection is 2 to `MAX_TABLES` tables, each with a label. Labels that carry a training step
(``step1000``, ``checkpoint-2000``, ``global_step300``, ``epoch3``, ``run-1k``) order the
collection by that number; otherwise it is a set, in the order given. Every table gets the
headline numbers of the single-table pages, computed by the same core functions with the same
defaults, and the tables are placed on a 2-D map by their pairwise linear CKA.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from posviz import _linalg
from posviz._params import defaults, records_params, refusal_text
from posviz._version import __version__
from posviz.boundary import position_statistics
from posviz.components import max_components, principal_components, sinusoid_likeness
from posviz.embedding import Embedding, LoadError
from posviz.offsets import (
    MAX_OFFSET,
    OffsetProfile,
    largest_offset,
    offset_profile,
    similarity_length,
)
from posviz.similarity import SimilarityMap, similarity_map
from posviz.spectrum import Spectrum, spectrum

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFINITIONS",
    "MAX_TABLES",
    "Collection",
    "Member",
    "Step",
    "TableSummary",
    "analyse",
    "cka_matrix",
    "classical_mds",
    "is_ordered",
    "member",
    "members_table",
    "order",
    "parse_step",
    "table_summary",
]

#: Most tables in one collection.
MAX_TABLES = 32
#: Cells a side of each table's similarity overview (small multiples: one of up to 32).
OVERVIEW_SIDE = 96

_MULTIPLIERS = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9}
#: Largest step read from a label: above it a number is not a step (float64, the axes' type,
#: holds every whole number up to 2**53 ~ 9e15 exactly).
MAX_STEP = 10**15
# A keyword, an optional separator, a number and an optional k/M/B multiplier, not followed by
# more digits or letters ("step1000", "checkpoint-2000", "global_step_300", "epoch3", "step1.5k").
# "-" separates only after checkpoint/ckpt (the Trainer's checkpoint-2000 folders); after step,
# iter or epoch it is a minus sign: "step-1" is not step 1 (and steps are not negative).
_KEYWORD = re.compile(
    r"(?<![a-z])(?:(checkpoint|ckpt)[-_ =]?|(global_step|step|iteration|iter|epoch)[_ =]?)"
    r"(\d+(?:\.\d+)?)([kmb]?)(?![a-z0-9])",
    re.IGNORECASE,
)
# Without a keyword only "...-1k" / "..._20k" at the end counts: a bare "-125m" is a model size
# (opt-125m, pythia-70m), not a step.
_THOUSANDS = re.compile(
    r"(?<!step)(?<!iter)(?<!iteration)(?<!epoch)[-_](\d+(?:\.\d+)?)k$", re.IGNORECASE
)
_FILE_SUFFIX = re.compile(r"\.(npy|npz|safetensors|csv|tsv|txt)$", re.IGNORECASE)


class Step(NamedTuple):
    """A training step read from a label: its number and its unit ("step" or "epoch")."""

    value: int | float
    unit: str


def parse_step(label: str) -> Step | None:
    """The training step a label names, or None.

    Keywords ``step``, ``global_step``, ``checkpoint``, ``ckpt``, ``iter(ation)`` give steps,
    ``epoch`` epochs; the last keyword in the label wins (``run3-step200`` is step 200).
    Without a keyword, a trailing ``-<n>k`` counts (thousands of steps). Zero padding and a
    file suffix are ignored; ``k``, ``M``, ``B`` multiply by 10^3, 10^6, 10^9.

    Examples
    --------
    >>> parse_step("checkpoint-02000"), parse_step("pythia-70m-step1.5k.npy")
    (Step(value=2000, unit='step'), Step(value=1500, unit='step'))
    >>> parse_step("epoch3").unit, parse_step("opt-125m"), parse_step("run-20k").value
    ('epoch', None, 20000)
    """
    text = _FILE_SUFFIX.sub("", label.strip())
    hits = list(_KEYWORD.finditer(text))
    if hits:
        checkpoint, keyword, number, multiplier = hits[-1].groups()
        unit = "epoch" if (keyword or checkpoint).lower() == "epoch" else "step"
    elif hit := _THOUSANDS.search(text):
        number, multiplier, unit = hit.group(1), "k", "step"
    else:
        return None
    # Exact (a float of 400 digits is infinity), and bounded.
    value = Fraction(number) * _MULTIPLIERS[multiplier.lower()]
    if value > MAX_STEP:
        return None
    return Step(int(value) if value.denominator == 1 else float(value), unit)


@dataclass(frozen=True, eq=False)
class Member:
    """One entry of a collection: a loaded table, or the reason it was refused.

    Attributes
    ----------
    label : str
        What the tables are called in tables, legends and exports (editable).
    table : Embedding or None
        None when refused.
    error : str or None
        The refusal, as `posviz._params.refusal_text` writes it (its code, if any, on the
        lines after its message), else None.
    """

    label: str
    table: Embedding | None = None
    error: str | None = None

    @property
    def step(self) -> Step | None:
        """The step the label names (see :func:`parse_step`)."""
        return parse_step(self.label)


def member(label: str, load: Callable[[], Embedding]) -> Member:
    """Run `load`; a refusal (LoadError, ValueError) becomes the member's error, not a raise."""
    try:
        return Member(label, load())
    except ValueError as error:  # LoadError included: too large, NaN, unreadable, ...
        return Member(label, error=refusal_text(error))


def _step_text(step: Step | None) -> str:
    """A step as the page shows it: its number, or "-" for a label without one."""
    return "-" if step is None else f"{step.value:,}"


def members_table(members: Sequence[Member]) -> pd.DataFrame:
    """One row per member, as the page's editor shows it: a "keep" box (ticked), its label,
    the step it names ("-": none), what it holds, loaded or refused."""
    import pandas as pd

    return pd.DataFrame(
        {
            "keep": [True] * len(members),
            "label": [m.label for m in members],
            "step": [_step_text(m.step) for m in members],
            "table": [
                f"{m.table.name} {m.table.shape[0]} x {m.table.shape[1]} ({m.table.dtype})"
                if m.table
                else ""
                for m in members
            ],
            "status": [f"refused: {m.error}" if m.error else "loaded" for m in members],
        }
    )


def is_ordered(members: Sequence[Member]) -> bool:
    """Whether every loaded member's label names a step, all in one unit (steps or epochs)."""
    steps = [m.step for m in members if m.table is not None]
    units = {None if s is None else s.unit for s in steps}
    return bool(units) and None not in units and len(units) == 1


def order(members: Sequence[Member]) -> tuple[Member, ...]:
    """Members by step (numerically: 200 before 1000) when ordered, else as given.

    Refused members without a step go last; ties keep their given order.
    """
    if not is_ordered(members):
        return tuple(members)
    return tuple(sorted(members, key=lambda m: (m.step is None, m.step and m.step.value)))


# --- one table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSummary:
    """What a collection keeps of one table: its headline numbers and three small results.

    Attributes
    ----------
    metrics : dict of str to number or None
        See :data:`DEFINITIONS`.
    spectrum : Spectrum
    profile : OffsetProfile
        Mean cosine similarity against offset, up to `MAX_OFFSET`.
    overview : SimilarityMap
        Cosine similarity map, block means at most `OVERVIEW_SIDE` cells a side.
    params : dict
        The settings of :func:`table_summary` (``center``).
    """

    metrics: dict[str, float | int | None]
    spectrum: Spectrum
    profile: OffsetProfile
    overview: SimilarityMap
    params: dict = field(default_factory=dict)


#: The settings of the sinusoid likeness each summary computes: the Components page's defaults.
_PC = defaults(principal_components)
_LIKENESS = defaults(sinusoid_likeness)
#: Every number of a collection's metrics table beyond shape and rows, defined.
DEFINITIONS = {
    "k50 .. k99": "Fewest principal components explaining 50/80/90/95/99% of the variance.",
    "effective_rank": "exp(entropy of σ_i / Σσ_j) (Roy & Vetterli 2007).",
    "stable_rank": "Σσ_i² / σ_1².",
    "participation_ratio": "(Σλ_i)² / Σλ_i², λ = σ².",
    "n_above_noise": "Singular values above the Spectrum page's noise threshold.",
    "first_norm_ratio, last_norm_ratio": "‖e_0‖ and ‖e_last‖ over the median row norm.",
    "first_neighbour_cos, last_neighbour_cos": "Cosine of the first (last) row with its "
    "neighbour (uncentred, as on the Boundaries page).",
    "similarity_length": "Offset where mean cosine similarity first falls below 1/e of m(0) (the "
    f"Similarity page's similarity length; None: not within the first {MAX_OFFSET} offsets).",
    "translation_invariance": "Share of the variance of s(i, j) explained by the offset alone.",
    "sinusoid_mean_cos2": f"Mean cos² of the principal angles between the top-"
    f"{_PC['n_components']} PC trajectories and cos/sin(π f p / n), f = 1.."
    f"{_LIKENESS['n_frequencies']} (the Components page's defaults).",
    "shuffled_mean_cos2, sinusoid_p_value": f"The same after shuffling rows "
    f"({_LIKENESS['n_shuffles']} seeded shuffles, seed {_LIKENESS['seed']}): the chance level, "
    f"and p = (1 + #shuffles at least as sinusoid-like) / (1 + {_LIKENESS['n_shuffles']}), at "
    f"least 1 / {_LIKENESS['n_shuffles'] + 1}.",
}


@records_params
def table_summary(values: np.ndarray, *, center: bool = True) -> TableSummary:
    """A table's headline numbers by the single-table pages' core functions and defaults.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    center : bool
        Subtract the mean row first (spectrum, similarity, components), as the pages'
        centring toggle (on by default). The boundary statistics never centre, as on the
        Boundaries page.
    """
    n, d = values.shape
    s = spectrum(values, center=center)
    # The mean only (the same numbers as the Similarity page's), not its spread over i.
    profile = offset_profile(
        values, metric="cosine", center=center, max_offset=largest_offset(n), spread=False
    )
    stats = position_statistics(values)
    norm, cos = stats.norm, stats.neighbour_cos
    median = float(np.median(norm))
    k = min(_PC["n_components"], max_components((n, d), center=center))
    # The core's defaults, as on the Components page (which caps k and the frequencies alike).
    likeness = sinusoid_likeness(principal_components(values, n_components=k, center=center))
    metrics = {
        **s.metrics(),
        "first_norm_ratio": float(norm[0] / median) if median > 0 else None,
        "last_norm_ratio": float(norm[-1] / median) if median > 0 else None,
        "first_neighbour_cos": float(cos[0]),
        "last_neighbour_cos": float(cos[-1]),
        "similarity_length": similarity_length(profile.mean),
        "translation_invariance": profile.translation_invariance,
        "sinusoid_mean_cos2": likeness.mean_cos2,
        "shuffled_mean_cos2": likeness.shuffled_mean,
        "sinusoid_p_value": likeness.p_value,
    }
    overview = similarity_map(values, metric="cosine", center=center, max_side=OVERVIEW_SIDE)
    return TableSummary(metrics=metrics, spectrum=s, profile=profile, overview=overview)


# --- many tables ----------------------------------------------------------------------------


def cka_matrix(tables: Sequence[np.ndarray], *, center: bool = True) -> np.ndarray:
    """Linear CKA between every pair of tables on their common positions (first min(L) rows).

    ``CKA(X, Y) = <K_X, K_Y>_F / (||K_X||_F ||K_Y||_F)`` with ``K = X Xᵀ`` over the common
    positions (after removing each table's mean row over them if `center`): the formula of
    :func:`posviz.compare.linear_cka` on the position side, where tables of any width meet.
    All pairwise inner products are accumulated over row blocks of the K's, each K built once
    from one table's float64 copy at a time, instead of forming every pair's products again.

    Parameters
    ----------
    tables : sequence of ndarray of shape (n_positions_i, d_i)
    center : bool

    Returns
    -------
    ndarray of shape (n_tables, n_tables)
        Symmetric, ones on the diagonal (for tables that are not all zero).
    """
    n = min(len(t) for t in tables)
    inner = np.zeros((len(tables), len(tables)))
    # The rows of every table's position Gram matrix held at once: one block's bytes in all.
    step = max(1, _linalg.BLOCK_BYTES // (8 * n * len(tables)))
    for start in range(0, n, step):
        stop = min(start + step, n)
        rows = np.empty((len(tables), stop - start, n))
        for i, values in enumerate(tables):
            x = _linalg.centered(values[:n], center=center)  # one float64 copy at a time
            rows[i] = x[start:stop] @ x.T
            del x
        flat = rows.reshape(len(tables), -1)
        inner += flat @ flat.T
        del rows, flat  # before the next block's: one block of rows alive at a time
    norms = np.sqrt(np.diag(inner))
    safe = np.where(norms > 0, norms, 1.0)
    return np.clip(inner / safe[:, None] / safe[None, :], -1.0, 1.0)


def classical_mds(distances: np.ndarray, *, dims: int = 2) -> tuple[np.ndarray, float]:
    """Classical (Torgerson) MDS: coordinates whose Euclidean distances best match `distances`.

    Returns
    -------
    coordinates : ndarray of shape (n, dims)
        Centred; axis signs fixed so each axis' largest-magnitude coordinate is positive.
    share : float
        Share of the positive eigenvalues of the double-centred squared distances kept by the
        `dims` axes: 1 when the map is exact.
    """
    m = len(distances)
    j = np.eye(m) - 1 / m
    b = -0.5 * j @ (distances**2) @ j
    lam, vectors = np.linalg.eigh((b + b.T) / 2)
    lam, vectors = lam[::-1], vectors[:, ::-1]
    kept = np.clip(lam[:dims], 0.0, None)
    coordinates = vectors[:, :dims] * np.sqrt(kept)
    coordinates = np.pad(coordinates, ((0, 0), (0, dims - coordinates.shape[1])))
    largest = np.take_along_axis(coordinates, np.abs(coordinates).argmax(axis=0)[None], axis=0)
    coordinates *= np.where(largest < 0, -1.0, 1.0)
    positive = lam[lam > 0].sum()
    return coordinates, float(kept.sum() / positive) if positive > 0 else 1.0


@dataclass(frozen=True, eq=False)
class Collection:
    """Many tables analysed alike: the result the page, the exports, the report and CLI read.

    Attributes
    ----------
    members : tuple of Member
        In collection order (by step when :attr:`ordered`).
    summaries : tuple of TableSummary or None
        One per member, None for refused members.
    cka : ndarray of shape (n_loaded, n_loaded)
        Linear CKA between loaded tables on their first `common_positions` rows.
    coordinates : ndarray of shape (n_loaded, 2)
        Classical MDS of the distances ``sqrt(2 - 2 CKA)``.
    map_share : float
        Share of the distances' variance the 2-D map shows (see :func:`classical_mds`).
    common_positions : int
        min(L) over loaded tables.
    center : bool
    """

    members: tuple[Member, ...]
    summaries: tuple[TableSummary | None, ...]
    cka: np.ndarray
    coordinates: np.ndarray
    map_share: float
    common_positions: int
    center: bool

    @property
    def ordered(self) -> bool:
        """Whether every loaded table's label names a step (in one unit)."""
        return is_ordered(self.members)

    @property
    def loaded(self) -> tuple[Member, ...]:
        """Members holding a table, in collection order (the rows of `cka`)."""
        return tuple(m for m in self.members if m.table is not None)

    @property
    def tables(self) -> tuple[Embedding, ...]:
        """The tables of `loaded`."""
        return tuple(m.table for m in self.members if m.table is not None)

    @property
    def steps(self) -> tuple[Step, ...]:
        """The step each of `loaded` names, when `ordered` (else empty)."""
        steps = tuple(s for m in self.loaded if (s := m.step) is not None)
        return steps if self.ordered else ()

    @property
    def nbytes(self) -> int:
        """Bytes of the tables held (each in its stored float32 or float64 dtype)."""
        return sum(t.values.nbytes for t in self.tables)

    def summary(self, label: str) -> TableSummary:
        """The summary of the loaded table labelled `label`."""
        (found,) = [
            s for m, s in zip(self.members, self.summaries, strict=True) if s and m.label == label
        ]
        return found

    def describe(self) -> str:
        """How many tables were loaded, and whether they are ordered by step or a set."""
        order = f"ordered by {self.steps[0].unit}" if self.ordered else "a set of models"
        return f"{len(self.loaded)} tables, {order}"

    def header(self) -> dict[str, object]:
        """The header of the collection's exports: the analysis of each table and its params,
        every member's provenance (or why it was refused), and how the tables were compared."""
        return {
            "analysis": table_summary.__name__,  # the step, as posviz.pipeline names it
            "params": {"center": self.center},
            "provenance": [
                {"label": m.label, **(m.table.provenance() if m.table else {"error": m.error})}
                for m in self.members
            ],
            "collection": self.procedure(),
        }

    def procedure(self) -> dict[str, object]:
        """How the collection's numbers were made, in words, beside the summaries' params."""
        return {
            "posviz_version": __version__,
            "ordered_by": (self.steps[0].unit if self.ordered else None),
            "offset_profile": f"cosine, offsets 0..min(n - 1, {MAX_OFFSET})",
            "similarity_length": "offset where mean cosine similarity first falls below 1/e "
            "of m(0)",
            "sinusoid_likeness": f"top-{_PC['n_components']} PCs vs cos/sin(pi f p / n), f = "
            f"1..min({_LIKENESS['n_frequencies']}, n // 2), {_LIKENESS['n_shuffles']} row "
            f"shuffles, seed {_LIKENESS['seed']}",
            "boundary_statistics": "uncentred rows",
            "cka": f"classic (biased) linear CKA, Kornblith et al. 2019, on the common first "
            f"{self.common_positions} positions "
            f"({'each table mean-centred over them' if self.center else 'uncentred'}); "
            "independent tables score above 0 (the Compare page shows the debiased one and a "
            "permutation null)",
            "map": f"classical MDS of sqrt(2 - 2 CKA); 2-D share {self.map_share:.4f}",
        }

    def records(self) -> list[dict[str, Any]]:
        """One record per member: label, step, error, shape, rows and every metric."""
        keys = next(s.metrics for s in self.summaries if s is not None).keys()
        out = []
        for m, summary in zip(self.members, self.summaries, strict=True):
            table = m.table
            out.append(
                {
                    "label": m.label,
                    "step": m.step.value if m.step else None,
                    "error": m.error,
                    "tensor": table.name if table else None,
                    "dtype": table.dtype if table else None,
                    "shape": list(table.shape) if table else None,
                    "rows": table.describe_rows() if table else None,
                    **(summary.metrics if summary else dict.fromkeys(keys)),
                }
            )
        return out

    def to_frame(self, *, refused: bool = True) -> pd.DataFrame:
        """:meth:`records` as a frame, shape as two columns (sortable), the error last.

        Without the refused members' rows (and the error column) if not `refused`.
        """
        import pandas as pd

        frame = pd.DataFrame([r for r in self.records() if refused or r["error"] is None])
        shape = frame.pop("shape")
        frame.insert(6, "n_positions", [s[0] if s else None for s in shape])
        frame.insert(7, "d_model", [s[1] if s else None for s in shape])
        frame["error"] = frame.pop("error")  # long messages: last
        return frame if refused else frame.drop(columns="error")

    def shown_table(self) -> pd.DataFrame:
        """:meth:`table` as the page shows it: the step as text, "-" where a label has none
        (the exports keep numbers and null)."""
        frame = self.to_frame()
        frame["step"] = [_step_text(m.step) for m in self.members]
        return frame

    @property
    def digest(self) -> str:
        """A digest of what the collection was made of (labels, tables' sha256, refusals,
        centring): equal digests, equal results."""
        parts = [(m.label, m.table.sha256 if m.table else None, m.error) for m in self.members]
        return hashlib.blake2b(repr((parts, self.center)).encode()).hexdigest()

    def cka_table(self) -> pd.DataFrame:
        """:attr:`cka` with the loaded tables' labels: a column "table", then one per table."""
        import pandas as pd

        labels = [m.label for m in self.loaded]
        frame = pd.DataFrame(self.cka, columns=labels)
        frame.insert(0, "table", labels)
        return frame


def _unique_labels(members: Sequence[Member]) -> list[Member]:
    """Repeated labels numbered ("a", "a (2)"): legends and tables need one name per table."""
    seen: dict[str, int] = {}
    out = []
    for m in members:
        seen[m.label] = seen.get(m.label, 0) + 1
        out.append(m if seen[m.label] == 1 else replace(m, label=f"{m.label} ({seen[m.label]})"))
    return out


def analyse(
    members: Sequence[Member],
    *,
    center: bool = True,
    summarize: Callable[[Embedding], TableSummary] | None = None,
) -> Collection:
    """Order `members`, summarise every loaded table, and map them by pairwise CKA.

    Parameters
    ----------
    members : sequence of Member
        1 to `MAX_TABLES` of them, at least one loaded.
    center : bool
    summarize : callable, optional
        ``summarize(table) -> TableSummary``; by default :func:`table_summary` with `center`.
        The app passes a cached version of the same function (and reports progress in it).

    Raises
    ------
    LoadError
        If there are more than `MAX_TABLES` members or none holds a table.
    """
    if len(members) > MAX_TABLES:
        msg = f"{len(members)} tables: a collection holds at most {MAX_TABLES}; remove some."
        raise LoadError(msg)
    members = order(_unique_labels(members))
    loaded = [m.table for m in members if m.table is not None]
    if not loaded:
        msg = "No table of the collection could be loaded: " + "; ".join(
            f"{m.label}: {m.error}" for m in members
        )
        raise LoadError(msg)
    summarize = summarize or (lambda t: table_summary(t.values, center=center))
    summaries = tuple(summarize(m.table) if m.table is not None else None for m in members)
    cka = cka_matrix([t.values for t in loaded], center=center)
    coordinates, share = classical_mds(np.sqrt(np.clip(2 - 2 * cka, 0.0, None)))
    return Collection(
        members=members,
        summaries=summaries,
        cka=cka,
        coordinates=coordinates,
        map_share=share,
        common_positions=min(len(t.values) for t in loaded),
        center=center,
    )
