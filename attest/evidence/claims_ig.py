"""The rules of the integrated-gradients checks (attest/collection/ig/) and the export
check (attest/collection/export/): per input or output, the item status from its figures and
the check's recorded tolerances."""

from __future__ import annotations

from typing import Any

from attest.evidence.claims import ClaimChecker, number, recorded_tolerance
from attest.evidence.model import Evidence

__all__ = [
    "export",
    "ig_baseline",
    "ig_completeness",
    "ig_convergence",
    "ig_determinism",
    "ig_monotonicity",
    "ig_randomization",
]


def export(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/export/check.py: an output passes iff its error against eager is within
    rtol and (when float64 ran) against float64 within rtol plus eager's own error; the
    repeatability item passes iff the two runs were bit-exact."""
    for item in c.result.items:
        m = item.metrics
        if "onnxruntime_repeat_bit_exact" in m and item.subject.kind == "model":
            bit_exact = m["onnxruntime_repeat_bit_exact"]
            c.item(
                item,
                ("pass",) if bit_exact is True else ("fail",),
                "pass iff bit-exact",
                onnxruntime_repeat_bit_exact=bit_exact,
            )
            continue
        if item.subject.kind != "output" or m.get("shape_matches") is False:
            continue
        rtol = recorded_tolerance(c, item)
        eager = number(m.get("max_rel_error_vs_eager"))
        exact, own = (
            number(m.get("max_rel_error_vs_float64")),
            number(m.get("eager_rel_error_vs_float64")),
        )
        ok = eager is not None and rtol is not None and eager <= rtol
        if m.get("max_rel_error_vs_float64") is not None:
            ok = (
                ok
                and exact is not None
                and own is not None
                and rtol is not None
                and exact <= rtol + own
            )
        c.item(
            item,
            ("pass",) if ok else ("fail",),
            "pass iff within rtol of eager and float64",
            max_rel_error_vs_eager=eager,
            max_rel_error_vs_float64=exact,
            rtol=rtol,
        )


def ig_completeness(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/checks.py: pass iff the relative error is finite and within the recorded
    tolerance with finite sides; warn (a near miss judged on the error curve in details) and
    fail need the error above it (a non-finite side fails)."""
    tolerance = c.parameter("tolerance")
    for item in c.result.items:
        m = item.metrics
        rel = number(m.get("completeness_rel_error"))
        finite = (
            rel is not None
            and number(m.get("f_input")) is not None
            and number(m.get("f_baseline")) is not None
            and not m.get("nonfinite_attributions")
        )
        within = finite and tolerance is not None and rel is not None and rel <= tolerance
        allowed = ("pass",) if within else ("fail",) if not finite else ("warn", "fail")
        c.item(
            item,
            allowed,
            f"pass iff completeness_rel_error <= tolerance {tolerance}",
            completeness_rel_error=m.get("completeness_rel_error"),
        )


def ig_convergence(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/checks.py: pass iff converged (warn/fail on the error curve otherwise)."""
    for item in c.result.items:
        converged = item.metrics.get("converged")
        c.item(
            item,
            ("pass",) if converged is True else ("warn", "fail"),
            "pass iff converged",
            converged=converged,
        )


_SEVERITY = {"pass": 0, "warn": 1, "fail": 2}


def _baseline_reading(
    m: dict[str, Any], prefix: str, min_entropy: float | None, max_ratio: float | None
) -> tuple[str, dict[str, object]]:
    """The status one output's baseline readings give (``prefix``: ``"head."`` for a head of
    a spec with ``heads:``, "" otherwise), and the figures it was read from."""
    if m.get(f"{prefix}classifier") is True:
        p, limit, entropy = (
            number(m.get(prefix + k))
            for k in (
                "baseline_target_probability",
                "target_probability_limit",
                "baseline_entropy_ratio",
            )
        )
        shown: dict[str, object] = {
            f"{prefix}baseline_target_probability": p,
            f"{prefix}target_probability_limit": limit,
            f"{prefix}baseline_entropy_ratio": entropy,
        }
        if p is None or limit is None or entropy is None or min_entropy is None:
            return "fail", shown  # a non-finite reading fails
        return ("fail" if p >= limit else "warn" if entropy < min_entropy else "pass"), shown
    ratio = number(m.get(f"{prefix}baseline_output_ratio"))
    ok = ratio is not None and max_ratio is not None and ratio <= max_ratio
    return ("pass" if ok else "fail"), {f"{prefix}baseline_output_ratio": ratio}


def ig_baseline(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/checks.py baseline (collection/ig/neutrality.py): for a classifier, fail
    iff the baseline reads as the target (p >= limit), warn iff its entropy ratio is below
    min_entropy_ratio; otherwise fail iff |F(b)|/|F(x)| exceeds max_output_ratio. Non-finite
    readings fail. With ``heads:`` each head is read on its own (metrics prefixed by the
    head's name) and the item's status is the worst of its heads'."""
    min_entropy = c.parameter("min_entropy_ratio")
    max_ratio = c.parameter("max_output_ratio")
    for item in c.result.items:
        m = item.metrics
        if item.status in ("not_computed", "error"):
            continue
        heads = sorted(k[: -len("classifier")] for k in m if k.endswith(".classifier"))
        if not heads and "classifier" in c.result.summary:
            c.equal(
                item.subject.label(),
                "classifier",
                m.get("classifier"),
                c.result.summary["classifier"],
                "the summary's classifier: one reading for every input",
            )
        readings = [
            _baseline_reading(m, prefix, min_entropy, max_ratio) for prefix in heads or [""]
        ]
        want = max((r[0] for r in readings), key=_SEVERITY.__getitem__)
        shown = {k: v for _, figures in readings for k, v in figures.items()}
        c.item(
            item,
            (want,),
            "the baseline's target probability and entropy (a classifier), else "
            "pass iff |F(b)|/|F(x)| <= max_output_ratio; the worst of the heads",
            **shown,
        )


def ig_monotonicity(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/path_checks.py monotonicity."""
    max_jump, max_share = c.parameter("max_jump"), c.parameter("max_spike_share")
    for item in c.result.items:
        m = item.metrics
        jump, share = number(m.get("max_jump_ratio")), number(m.get("max_spike_share"))
        flips = m.get("sign_flips_beyond_tolerance")
        if max_jump is None or max_share is None:
            continue
        bad = (
            bool(m.get("nonfinite_nodes"))
            or jump is None
            or share is None
            or jump > max_jump
            or share > max_share
        )
        want = "fail" if bad else ("warn" if flips else "pass")
        c.item(
            item,
            (want,),
            "jumps and spikes fail, sign flips beyond tolerance warn",
            nonfinite_nodes=m.get("nonfinite_nodes"),
            max_jump_ratio=jump,
            max_spike_share=share,
            sign_flips_beyond_tolerance=flips,
        )


def ig_randomization(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/path_checks.py: fail iff the final Spearman stays >= max_spearman (or
    <= -max_spearman with the magnitudes' Spearman >= sign_flip_abs_spearman)."""
    top, flip = c.parameter("max_spearman"), c.parameter("sign_flip_abs_spearman")
    for item in c.result.items:
        if item.status in ("not_computed", "error") or top is None or flip is None:
            continue
        final, magnitude = (
            number(item.metrics.get("spearman_final")),
            number(item.metrics.get("spearman_abs_final")),
        )
        if final is None:
            if item.metrics.get("spearman_final") is None and item.status == "pass":
                continue  # constant attributions of the randomized model: a pass
            c.item(
                item,
                ("fail",),
                "a non-finite Spearman fails",
                spearman_final=item.metrics.get("spearman_final"),
            )
            continue
        bad = final >= top or (final <= -top and (magnitude or 0.0) >= flip)
        c.item(
            item,
            ("fail",) if bad else ("pass",),
            f"fail iff Spearman stays >= {top:g}",
            spearman_final=final,
            spearman_abs_final=magnitude,
        )


def ig_determinism(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/path_checks.py: pass iff bit_exact."""
    items = c.result.items
    for item in items:
        exact = item.metrics.get("bit_exact")
        c.item(
            item, ("pass",) if exact is True else ("fail",), "pass iff bit_exact", bit_exact=exact
        )
    c.summary(
        "bit_exact", all(i.metrics.get("bit_exact") is True for i in items), "every item bit_exact"
    )
