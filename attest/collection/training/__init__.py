"""The training checks: the gradients under the ``training:`` configuration the spec declares.

``mixed_precision`` (autocast and the loss scaler), ``recompute`` (activation checkpointing),
``batch_invariance`` (the declared batch sizes) and ``resume`` (save and resume mid-training);
:mod:`.runner` runs them in that order. docs/training.md explains each.
"""
