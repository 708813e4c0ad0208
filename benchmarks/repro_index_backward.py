"""By hand, outside attest: is SwinUNETR's ``aten.index`` backward nondeterministic run to run on
this CPU? (the determinism item bench_certify.py reports on SwinUNETR; docs/benchmarks.md,
"Clinical-strict at real size").

MONAI's window attention gathers its relative position bias as
``table[relative_position_index[:n, :n].reshape(-1)]``: 117,649 indices into 2,197 rows. The
gather's backward is ``index_put_(accumulate=True)``, which PyTorch documents as
nondeterministic on a CPU tensor unless ``torch.use_deterministic_algorithms(True)``. The same
gradient is computed 30 times with the same inputs and compared bit for bit with the first, at
2 threads (the spec's), at 1 thread, and at 2 threads with deterministic algorithms on.

    .venv/bin/python benchmarks/repro_index_backward.py
"""

from __future__ import annotations

import torch
from monai.networks.nets import SwinUNETR

RUNS = 30


def main() -> None:
    torch.manual_seed(0)
    net = SwinUNETR(in_channels=1, out_channels=2, feature_size=24)
    attn = net.swinViT.layers1[0].blocks[0].attn  # window 7x7x7, 3 heads
    table = attn.relative_position_bias_table.detach().clone()
    n = 7**3
    index = attn.relative_position_index.clone()[:n, :n].reshape(-1)  # as MONAI's forward does
    g = torch.randn(index.numel(), table.shape[1], generator=torch.Generator().manual_seed(1))
    print(f"table {tuple(table.shape)}, {index.numel()} indices, {index.unique().numel()} distinct")

    def grad() -> torch.Tensor:
        leaf = table.clone().requires_grad_(True)
        leaf[index].backward(g)  # aten.index; its backward is index_put_(accumulate=True)
        assert leaf.grad is not None
        return leaf.grad

    for threads, deterministic in ((2, False), (1, False), (2, True)):
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
        ref = grad()
        grads = [grad() for _ in range(RUNS)]
        differ = sum(not torch.equal(ref, g_) for g_ in grads)
        worst = max((g_ - ref).abs().max().item() for g_ in grads)
        print(
            f"threads {threads}, deterministic algorithms {deterministic}: {differ}/{RUNS} runs "
            f"differ in bits from the first; largest difference {worst:.3e}"
        )


if __name__ == "__main__":
    main()
