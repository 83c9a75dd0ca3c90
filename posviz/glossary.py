"""The words posviz shows without explaining them where they stand: one line each.

The app's sidebar shows them on every page, the report at its end. A page's own tooltips
(the analyses' ``DEFINITIONS``) say more; these lines say enough to read a number.
"""

from __future__ import annotations

from posviz.offsets import PEAK_PROMINENCE
from posviz.probes import RELATIVE_CHANCE
from posviz.schemes.rotary import BANDS

__all__ = ["GLOSSARY", "TOPICS"]

#: Term -> one line, grouped by where the term is met (the topics in page order).
TOPICS: dict[str, dict[str, str]] = {
    "Spectrum": {
        "singular value σₖ": "How much of the table lies along its k-th principal direction; "
        "σₖ² is that component's variance.",
        "k50 … k99": "The fewest components holding 50 … 99% of the variance (Σσ²).",
        "effective rank": "As many equal singular values would spread the same way (entropy "
        "of σ); a long tail of small σ raises it.",
        "stable rank": "Σσ²/σ₁²: how many components as strong as the first would hold the "
        "variance; one dominant component keeps it near 1.",
        "participation ratio": "(Σσ²)²/Σσ⁴: how many components share the variance; r for r "
        "equal singular values, at least the stable rank.",
        "number above noise": "How many singular values stand above the noise threshold: the "
        "components that are signal rather than noise.",
        "noise threshold": "Gavish & Donoho's cut-off ω(β)·median σ: singular values of pure "
        "noise stay below it.",
        "Gram route": "How posviz computes the spectrum: σ = √λ from the eigenvalues λ of the "
        "float64 Gram matrix (XᵀX or XXᵀ, whichever is smaller); its rounding sets the floor.",
        "resolution floor": "σ₁·√(min(n, d)·ε): singular values below it are rounding noise of "
        "the Gram route (drawn grey), not structure.",
    },
    "Similarity": {
        "m(k)": "The mean similarity of positions k apart, over every pair (i, i + k).",
        "translation invariance": "The share of the similarity map's variance the offset k "
        "alone explains: 1 when s(i, j) depends on i − j only.",
        "monotonicity ρ": "Rank correlation of m(k) with k over the first offsets: −1 when "
        "similarity falls with every step.",
        "falls until k": "The last offset before m(k) first stops falling.",
        "similarity length (1/e)": "The first offset at which m(k) falls below m(0)/e.",
        "length (0)": "The first offset at which m(k) falls below 0 (blank if it never does).",
        "sign changes": "How often m(k) changes sign over the offsets shown.",
        "ringing peaks": f"Peaks of m(k) at least {PEAK_PROMINENCE:g} times its noise "
        "prominent: the bands parallel to the diagonal of e.g. GPT-2's map.",
    },
    "Components": {
        "PC": "A principal component: a direction of the (centred) table; its score over "
        "position is the trajectory drawn.",
        "sinusoid fit R²": "The share of a PC trajectory's variance the best single sinusoid "
        "a·cos(2πfp/n + φ) + c explains.",
        "at lower bound": "A fit at the slowest frequency allowed (half a cycle): a trend, not "
        "an oscillation.",
    },
    "Boundaries & probes": {
        "robust z": "How far a position's statistic is from the median of its window, in "
        "robust standard deviations (MAD); large = an odd row.",
        "change point": "A position where a statistic steps against its local trend.",
        "MAE": "The absolute probe's mean error, in positions, predicting a row's position "
        "from its vector (out of fold).",
        "chance MAE": "The same error for always guessing the training rows' mean position.",
        "skill": "1 − MAE / chance MAE: 1 perfect, 0 no better than chance, < 0 worse.",
        "relative error rate": "Share of held-out pairs whose order (is j after i?) the "
        f"relative probe gets wrong; chance {RELATIVE_CHANCE:g}.",
        "controls": "The same probes on the table's rows at shuffled positions, and on "
        "Gaussian rows: what no position information scores.",
    },
    "Compare": {
        "linear CKA": "Similarity of two tables' position-by-position structure, 0 to 1, "
        "blind to rotation and scale; debiased: its chance level is 0.",
        "principal angles": "Angles between the spans of two tables' top-k components: 0° = "
        "the same positional signal.",
        "Procrustes error": "What is left after rotating one (normalised) table onto the "
        "other: 0 for a rotated copy; needs equal widths.",
    },
    "Schemes": {
        "L₀": "The context length a model was pre-trained at (original_max_position_embeddings, "
        "else max_position_embeddings).",
        "pairs beyond L₀": "Rotary pairs whose wavelength exceeds L₀: they never made a full "
        "turn in training.",
        "division": "How many times slower the scaling rule makes a pair rotate: θ over "
        "the θ it applies (1: as in training).",
        "kept": f"A rotary pair the scaling rule leaves alone: it {BANDS['kept']}.",
        "blended": f"A pair the rule slows part of the way: {BANDS['blended']}.",
        "divided": f"A pair the rule slows the whole way: {BANDS['divided']}.",
        "unrotated": "A pair that never turns (θ = 0): proportional's unrotated part of the head.",
        "attention factor": "What the scaling rule multiplies cos and sin by; the logits scale "
        "by its square (the logit multiplier).",
        "B(Δ)": "The mean over rotary pairs of cos(Δθᵢ): the similarity of a query and a key Δ "
        "apart with equal contents, how fast position alone decays.",
    },
}

#: Every term of :data:`TOPICS` with its line.
GLOSSARY: dict[str, str] = {term: line for terms in TOPICS.values() for term, line in terms.items()}
