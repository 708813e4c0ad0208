"""The operator profiler and its checks: run 0, float64 fidelity, repeats, thread count, numerics, topology."""
