"""The pytest plugin of gradient-attest (entry point ``pytest11``: ``attest``).

A fixture and a marker::

    @pytest.mark.attest_checks("gradcheck", "numerics")      # optional: which checks
    def test_gradients(gradient_check):
        gradient_check(build_model(), torch.randn(2, 3, 32, 32),
                       target=torch.tensor([0, 1]), loss=F.cross_entropy)

``gradient_check(model, inputs, *, target=None, loss=None, checks=None, policy=None)`` runs the
checks of ``attest collect`` (:func:`attest.testing.gradient_checks.check_gradients`) and fails
the test with one line per failure naming the check, the operator, the module and the error.
The marker sets the checks (and ``policy=``) for the test; arguments of the call override it.
``inputs`` may be a tuple (positional arguments) or a dict (keyword arguments) of tensors:
float ones are differentiated, token ids and masks passed unchanged, never cast
(:mod:`attest.testing.named_inputs`: the spec's named inputs; ``roles=`` as in attest.yaml).
Importing this module imports neither torch nor the collect stage (pytest loads it in every
session of a project that has gradient-attest installed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["gradient_check", "pytest_configure"]

MARKER = "attest_checks"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*checks, policy=None): the gradient checks (check ids of attest collect) the "
        "gradient_check fixture runs in this test",
    )


@pytest.fixture
def gradient_check(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run gradient checks on a model and a small input; fail the test on a failure."""
    marker = request.node.get_closest_marker(MARKER)
    marked_checks = tuple(marker.args) if marker is not None and marker.args else None
    marked_policy = marker.kwargs.get("policy") if marker is not None else None

    def run(model: Any, inputs: Any, **kwargs: Any) -> Any:
        from attest.errors import AttestError
        from attest.testing.gradient_checks import DEFAULT_CHECKS, check_gradients

        checks = kwargs.pop("checks", None) or marked_checks or DEFAULT_CHECKS
        kwargs.setdefault("policy", marked_policy)
        problem = None
        try:
            result = check_gradients(model, inputs, checks=checks, **kwargs)
        except AttestError as exc:
            problem = exc.diagnostics()
        if problem is not None:  # outside the except block: no chained traceback in the report
            pytest.fail(f"gradient checks could not run: {problem}", pytrace=False)
        if not result.passed:
            pytest.fail(result.summary(), pytrace=False)
        return result

    return run
