"""Per check id, the rule by which the collector derives its claims from its figures.

Each rule restates the line of the runner that sets an item's status or a summary count (the
runner is named in the rule's docstring), reading only the evidence:
:mod:`attest.evidence.consistency` runs them. Where a status depends on something the evidence
does not record (a near miss judged on an error curve kept only in ``details``, a fix-up
applied by another check), the rule says so and checks the direction the figures can decide.
Every check id in :data:`attest.evidence.model.CHECK_IDS` is covered here or, for the training
checks, by the generic rules of :mod:`attest.evidence.consistency`.
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

__all__ = ["CHECK_RULES", "GENERIC_ONLY", "evidence_rules"]

# The four training checks (attest/collection/training/) judge items against tolerances that
# scale with the autocast dtype and recorded tensors the evidence keeps only in details: their
# claims are held by the generic rules (no verdict outside a computed check, a computed check
# has a summary, one item per operator, items_* counts) and the policy's metric rules.
GENERIC_ONLY: tuple[str, ...] = ("mixed_precision", "recompute", "batch_invariance", "resume")

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
}
