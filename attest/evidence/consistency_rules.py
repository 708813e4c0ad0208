"""Per check id, the rule by which the collector derives its claims from its figures.

Each rule restates the line of the runner that sets an item's status or a summary count (the
runner is named in the rule's docstring), reading only the evidence:
:mod:`attest.evidence.consistency` runs them. Where a status depends on something the evidence
does not record (a near miss judged on an error curve kept only in ``details``, a fix-up
applied by another check), the rule says so and checks the direction the figures can decide.
Every check id in :data:`attest.evidence.model.CHECK_IDS` has a rule here, beside the generic
rules of :mod:`attest.evidence.consistency`.
"""

from __future__ import annotations

from attest.evidence.claims import Rule
from attest.evidence.claims_gradients import (
    accumulation,
    custom_ops,
    gradcheck,
    gradient_flow,
    kinks,
    second_order,
)
from attest.evidence.claims_ig import (
    export,
    ig_baseline,
    ig_completeness,
    ig_convergence,
    ig_determinism,
    ig_monotonicity,
    ig_randomization,
)
from attest.evidence.claims_profile import (
    determinism,
    evidence_rules,
    fidelity,
    numerics,
    thread_sensitivity,
    topology,
)
from attest.evidence.claims_training import batch_invariance, mixed_precision, recompute, resume

__all__ = ["CHECK_RULES", "evidence_rules"]

CHECK_RULES: dict[str, Rule] = {
    "topology": topology,
    "determinism": determinism,
    "fidelity": fidelity,
    "gradcheck": gradcheck,
    "custom_ops": custom_ops,
    "kinks": kinks,
    "gradient_flow": gradient_flow,
    "numerics": numerics,
    "accumulation": accumulation,
    "second_order": second_order,
    "ig_completeness": ig_completeness,
    "ig_convergence": ig_convergence,
    "ig_baseline": ig_baseline,
    "ig_monotonicity": ig_monotonicity,
    "ig_randomization": ig_randomization,
    "ig_determinism": ig_determinism,
    "export": export,
    "thread_sensitivity": thread_sensitivity,
    "mixed_precision": mixed_precision,
    "recompute": recompute,
    "batch_invariance": batch_invariance,
    "resume": resume,
}
