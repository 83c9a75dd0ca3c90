"""`posviz plan SOURCE --target N`: a rotary model extended to N positions, every rope scaling
rule side by side (`posviz.schemes.plan`): what each does to each frequency pair, and the
settings for transformers 5 and 4, llama.cpp and vLLM. SOURCE is anything `posviz summary`
reads a scheme from (a config.json, ``preset:NAME``, ``hf:REPO[@REV]``, a GGUF file, a
checkpoint with its config.json beside it). Every refusal is one line and exit 2."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from posviz import pipeline
from posviz._params import Refused, quoted
from posviz.export import header
from posviz.models.weights import read_config
from posviz.schemes.config import position_scheme
from posviz.schemes.plan import BANDS, TARGETS, ContextPlan

__all__ = ["add_parser", "run"]

EXAMPLES = """examples:
  posviz plan preset:meta-llama/Llama-3.1-8B --target 65536
  posviz plan config.json --target 16384 --json        one JSON object (scripts read it)
  posviz plan hf:mistralai/Mistral-7B-v0.1 --target 65536
  posviz plan model-Q4_K_M.gguf --target 32768
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The `plan` subcommand."""
    parser = commands.add_parser(
        "plan",
        help="a rotary model at a longer context: every rope scaling rule and its settings",
        description="Plan a longer context for a rotary model: for the target N and s = N / L "
        "(L: original_max_position_embeddings, else max_position_embeddings), every rule side "
        "by side (none, linear, ntk_aware, dynamic, yarn, llama3, longrope with the model's own "
        "factors, critical_base): its inv_freq and attention factor, the pairs it leaves, "
        "blends and divides by s, the pairs whose angles at N go beyond those of training, and "
        "the settings for transformers 5 and 4, llama.cpp and vLLM. What each rule does to "
        "the positions, not which gives the lowest perplexity.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source",
        metavar="SOURCE",
        help="a config.json, preset:NAME, hf:REPO[@REVISION], a .gguf file, or a checkpoint "
        "with its config.json beside it",
    )
    parser.add_argument(
        "--target",
        required=True,
        metavar="N",
        help=f"the context wanted, in positions (a whole number from 1 to {TARGETS.high:,})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    target = _target(args.target)
    config, provenance, _ = read_config(args.source)
    plan = pipeline.call(pipeline.context_plan, position_scheme(config), target=target)
    if args.json:
        print(json.dumps({**header(plan, provenance), **plan.record()}, allow_nan=False))
    else:
        print(describe(plan, str(provenance["config"])))
    return 0


def _target(text: str) -> int:
    """--target as a whole number (argparse's own refusal would print its usage, not one
    line); its range is the planner's to check."""
    if not re.fullmatch(r"\s*[+-]?\d{1,30}\s*", text):
        msg = f"--target is {quoted(text)}; it must be {TARGETS.describe()}."
        raise Refused(msg)
    return int(text)


def describe(plan: ContextPlan, source: str) -> str:
    """The plan for people: the model's facts, a table of the rules, each rule's settings."""
    spec = plan.spec
    critical = "—" if plan.critical_base is None else f"{plan.critical_base:.6g}"
    lines = [
        f"model            {source}: {spec.rope_type} rope, θ = {spec.base:g}, "
        f"d = {spec.rotary_dim} ({spec.n_pairs} pairs)",
        f"trained at L     {plan.original_context:,} ({plan.original_context_key})",
        f"target N         {plan.target:,}: s = N / L = {plan.factor:.6g}",
        f"critical dim     {plan.critical_dimension} (pairs k < {plan.critical_dimension // 2} "
        "turn within L; Liu et al. 2024)",
        f"critical base    {critical} (β₀ for N; Liu et al. 2024, eq. 16a)",
        "",
        f"{'rule':<14}{'factor':>8}{'rope_theta':>14}{'attn':>8}"
        + "".join(f"{band:>14}" for band in BANDS)
        + f"{'beyond':>8}  starts at λ",
    ]
    for rule in plan.rules:
        factor = "—" if rule.factor is None else f"{rule.factor:.6g}"
        wavelength = rule.interpolation_wavelength
        lines.append(
            f"{rule.rule:<14}{factor:>8}{rule.rope_theta:>14.6g}{rule.attention_factor:>8.4f}"
            + "".join(f"{len(rule.pairs(band)):>14}" for band in BANDS)
            + f"{int(rule.beyond_trained.sum()):>8}  "
            + ("—" if wavelength is None else f"{wavelength:.4g}")
        )
    lines += [
        "",
        "unchanged: θ'/θ = 1; interpolated: θ'/θ = 1/s; blended: other (relative tolerance "
        "1e-6); beyond: pairs that never turned within L whose angle at N exceeds their "
        "largest in training; starts at λ: the shortest wavelength the rule changes.",
        "The plan says what each rule does to the positions, not which gives the lowest "
        "perplexity (measured: YaRN's Table 1, LongRoPE's Table 1).",
    ]
    lines += [f"note: {note}" for note in plan.notes]
    for rule in plan.rules:
        lines += ["", f"[{rule.rule}]", *_settings(rule.record())]
    return "\n".join(lines)


def _settings(record: dict[str, Any]) -> list[str]:
    v4 = {"rope_theta": record["rope_theta"], "rope_scaling": record["rope_scaling"]}
    return [
        f"  transformers 5  max_position_embeddings {record['max_position_embeddings']}, "
        f"rope_parameters {_brief(record['rope_parameters'])}",
        f"  transformers 4  {_brief(v4)}",
        f"  llama.cpp       {record['llama_cpp']}",
        f"  vLLM            {record['vllm']}",
        *(f"  note: {note}" for note in record["notes"]),
    ]


def _brief(value: Any) -> str:
    """`value` as JSON, LongRoPE's lists of factors shortened (--json prints them whole)."""

    def short(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items()}
        if isinstance(v, list) and len(v) > 4:
            return [*v[:2], f"… {len(v)} values"]
        return v

    return json.dumps(short(value), ensure_ascii=False)
