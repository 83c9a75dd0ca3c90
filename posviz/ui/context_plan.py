"""The Schemes page's longer context: a target length and every rope scaling rule side by side
(what `posviz plan` prints), drawn: the table of rules, θ'/θ per pair against the bands, each
pair's angle at N against training, each rule's settings for transformers, llama.cpp and vLLM
(each with a copy button) and, where the model's weights are at hand, the share of layer 0's
usage on the pairs each rule changes. A refused plan leaves the last one drawn for the model."""

from __future__ import annotations

import json

import streamlit as st

from posviz import export, figures, pipeline
from posviz._params import Refused
from posviz.heads import RotaryHeads
from posviz.models import weights
from posviz.schemes.config import Scheme
from posviz.schemes.plan import (
    BANDS,
    CRITICAL_BASE_SOURCE,
    CRITICAL_DIMENSION_SOURCE,
    RULES,
    ContextPlan,
    RulePlan,
    context_plan,
    default_target,
    usage_shares,
)
from posviz.ui import cache, inputs, widgets
from posviz.ui import heads as heads_ui
from posviz.ui.schemes import Shown, follow
from posviz.ui.text import literal

__all__ = ["KEPT", "draw"]

#: The last plan drawn, with the model it is of: shown again when a plan is refused.
KEPT = "schemes.plan_kept"
SCOPE = (
    "What each rule does to the positions, computed exactly from config.json; not which rule "
    "gives the lowest perplexity. That is measured: YaRN (Peng et al. 2023, arXiv:2309.00071) "
    "Table 1 and LongRoPE (Ding et al. 2024, arXiv:2402.13753) Table 1 give perplexities of "
    "Llama-2 models extended beyond their 4,096 positions, each with its model, length and "
    "fine-tuning."
)


def draw(shown: Shown, scheme: Scheme) -> None:
    """The section: a target length, then the plan (or why there is none)."""
    follow(shown.identity, {"schemes.target": default_target(scheme)})
    target = inputs.setting(
        context_plan,
        "target",
        "Target length N (positions)",
        default=inputs.IN_STATE,
        key="schemes.target",
        step=1024,
        help="The context wanted. Each rule's factor is s = N / L, L the context the "
        "positions were trained at (original_max_position_embeddings, else "
        "max_position_embeddings).",
    )
    plan = _plan(shown, scheme, target)
    if plan is None:
        return
    st.caption(SCOPE)
    columns = st.columns(4)
    key = plan.original_context_key
    columns[0].metric("trained at L", f"{plan.original_context:,}", help=f"config.json's {key}")
    columns[1].metric("factor s = N / L", f"{plan.factor:.6g}")
    columns[2].metric("critical dimension", plan.critical_dimension, help=CRITICAL_DIMENSION_SOURCE)
    critical = "—" if plan.critical_base is None else f"{plan.critical_base:,.0f}"
    columns[3].metric("critical base β₀", critical, help=CRITICAL_BASE_SOURCE)
    for note in plan.notes:
        st.caption(literal(note))
    settings = export.header(plan, shown.provenance)
    labels = ["Rules", "θ'/θ per pair", "Angles at N", "Settings"]
    rules, ratios, angles, snippets = widgets.tabs_drawn_when_open(
        labels, key="schemes.plan_section"
    )
    with rules:
        if rules.open:
            widgets.show_numbers(
                plan.to_frame(), name="context_plan", settings=settings, pinned="rule"
            )
            st.caption(
                " · ".join(f"{band}: {words}" for band, words in BANDS.items())
                + " (relative tolerance 1e-6). beyond trained: pairs that never turned within L "
                "whose angle at N exceeds their largest in training. interpolation wavelength: "
                "the shortest unscaled wavelength 2π/θ the rule changes."
            )
            _usage(shown, plan)
    with ratios:
        if ratios.open:
            widgets.show_figure(
                figures.plan.ratios(plan), name="context_plan_ratios", settings=settings
            )
            with widgets.expander_drawn_when_open(
                "Numbers, per rule and pair", key="schemes.plan_pairs"
            ) as opened:
                if opened:
                    widgets.show_numbers(
                        plan.pairs_table(), name="context_plan_pairs", settings=settings
                    )
    with angles:
        if angles.open:
            widgets.show_figure(
                figures.plan.angles(plan), name="context_plan_angles", settings=settings
            )
    with snippets:
        if snippets.open:
            _settings(plan)


def _plan(shown: Shown, scheme: Scheme, target: int) -> ContextPlan | None:
    """The plan at `target`; when refused, the error and the last plan drawn for this model."""
    kept = st.session_state.get(KEPT)
    try:
        plan = cache.run(pipeline.context_plan, scheme, target=target)
    except Refused as error:
        st.error(literal(error), icon=":material/error:")
        if kept is None or kept[0] != shown.identity:
            return None
        st.caption(f"Below: the last plan drawn for this model, at N = {kept[1].target:,}.")
        return kept[1]
    st.session_state[KEPT] = (shown.identity, plan)
    return plan


def _settings(plan: ContextPlan) -> None:
    """One rule's settings for each runtime, each in a block with a copy button."""
    names = [rule.rule for rule in plan.rules]
    if st.session_state.get("schemes.plan_rule") not in names:
        st.session_state["schemes.plan_rule"] = names[-1] if len(names) == 1 else names[1]
    name = st.selectbox("Rule", names, key="schemes.plan_rule")
    rule: RulePlan = plan.rule(name)
    st.caption(literal(RULES[name]))
    v5 = {"max_position_embeddings": rule.max_position_embeddings,
          "rope_parameters": rule.rope_parameters}  # fmt: skip
    v4 = {"max_position_embeddings": rule.max_position_embeddings,
          "rope_theta": rule.rope_theta, "rope_scaling": rule.rope_scaling}  # fmt: skip
    st.markdown("**config.json, transformers 5**")
    st.code(json.dumps(v5, indent=2), language="json")
    st.markdown("**config.json, transformers 4** (rope_scaling null: remove the key)")
    st.code(json.dumps(v4, indent=2), language="json")
    st.markdown("**llama.cpp** (llama-server, llama-cli)")
    st.code(rule.llama_cpp, language="bash")
    st.markdown("**vLLM** (vllm serve MODEL …)")
    st.code(rule.vllm, language="bash", wrap_lines=True)
    for note in rule.notes:
        st.caption(literal(note))


def _usage(shown: Shown, plan: ContextPlan) -> None:
    """Where the model's weights are at hand: the share of layer 0's usage u(k) (summed over its
    heads; `posviz heads`) on the pairs each rule changes, beside the share of pairs it
    changes (what equal usage of every pair would give)."""
    model = shown.weights
    if model is None or isinstance(model, weights.LocalGGUF):
        return
    if not st.toggle(
        f"Share of layer 0's usage on the pairs each rule changes (reads layer 0's query and "
        f"key rows {shown.weights_place})",
        key="schemes.plan_heads",
    ):
        return
    try:
        found = heads_ui.layer(model, 0)
        result = heads_ui.heads(found)
    except Refused as error:
        st.info(literal(error), icon=":material/info:")
        return
    rotary = found.plan.rotary
    if not isinstance(result, RotaryHeads) or rotary is None:
        st.info("Layer 0 does not rotate q and k: no usage per pair.", icon=":material/info:")
        return
    if rotary.layer_type != plan.spec.layer_type:
        st.info(
            f"Layer 0 is a {literal(rotary.layer_type)} layer, whose rule the plan does not "
            "change.",
            icon=":material/info:",
        )
        return
    shares = usage_shares(plan, result.usage)
    st.dataframe(
        {
            "rule": list(shares),
            "share of layer 0's usage on the pairs it changes": list(shares.values()),
            "share of pairs it changes (equal usage)": [
                float((r.band != "unchanged").mean()) for r in plan.rules
            ],
        },
        hide_index=True,
        width="stretch",
    )
    st.caption(
        f"Usage u(k) = Σ over layer 0's {result.n_heads} heads of ‖W_Q rows of pair k‖·‖W_K "
        "rows of pair k‖ (the stored weights; Heads page). Beside it, the share equal usage "
        "of every pair would give."
    )
