"""The gradient correctness checks: gradcheck, kinks, second order, accumulation, gradient flow, custom ops."""
