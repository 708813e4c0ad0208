"""``GradientAssuranceCallback``: :class:`attest.TrainingMonitor` in a PyTorch Lightning run.

::

    from attest.integrations.lightning import GradientAssuranceCallback
    trainer = lightning.Trainer(callbacks=[
        GradientAssuranceCallback(loss_fn=F.cross_entropy, probe=(x_probe, y_probe),
                                  every=50, log="run.jsonl")])

After each training batch the monitor is called with the trainer's epoch and the global
step of the batch just trained (``trainer.global_step - 1``: optimizer steps before it; a
batch that accumulates gradients without stepping repeats the step, which the log keeps
once). Only the global-zero process writes the log.

Lightning is an optional dependency (``pip install 'gradient-attest[lightning]'``), imported
when the callback class is first asked for, so that importing this module costs nothing and
an installation without it gets an :class:`~attest.errors.AttestError` naming the extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attest.errors import InputError

__all__ = ["GradientAssuranceCallback"]  # noqa: F822 (made on first access, by __getattr__)


def _lightning() -> Any:
    try:
        import lightning.pytorch as pl
    except ModuleNotFoundError as exc:
        raise InputError(
            f"attest.integrations.lightning needs {exc.name}, which is not installed",
            hint="pip install 'gradient-attest[lightning]'",
        ) from None
    except Exception as exc:  # a broken dependency of lightning (a torchvision of another torch)
        raise InputError(
            f"lightning is installed but does not import: {type(exc).__name__}: {exc}",
            hint="repair the environment's lightning/torchmetrics/torchvision installation",
        ) from None
    return pl


def _build() -> type:
    pl = _lightning()
    from attest.collection.monitor import DEFAULT_EVERY, TrainingMonitor

    class GradientAssuranceCallback(pl.Callback):  # type: ignore[misc,name-defined]
        """Samples the monitor's figures during ``trainer.fit`` (see the module doc).

        ``loss_fn(pl_module(inputs), target)`` must give a scalar; ``probe`` is what
        :class:`attest.TrainingMonitor` takes (``inputs`` a tensor, a tuple of positional
        arguments or a mapping of keyword arguments; ids and masks are never cast). ``grad_scaler``: a GradScaler whose scale to
        record (default: the one of Lightning's mixed-precision plugin, if any).
        """

        def __init__(
            self,
            *,
            loss_fn: Any,
            probe: Any,
            every: int = DEFAULT_EVERY,
            log: str | Path = "run.jsonl",
            run_id: str | None = None,
            grad_scaler: Any = None,
        ) -> None:
            super().__init__()
            self.loss_fn, self.probe, self.every = loss_fn, probe, every
            self.log_path = log  # not `log`: a Callback method of that name
            self.run_id, self.grad_scaler = run_id, grad_scaler
            self.monitor: TrainingMonitor | None = None

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            if not trainer.is_global_zero:
                return
            scaler = self.grad_scaler or getattr(trainer.precision_plugin, "scaler", None)
            self.monitor = TrainingMonitor(
                pl_module,
                self.loss_fn,
                self.probe,
                every=self.every,
                log=self.log_path,
                run_id=self.run_id,
                grad_scaler=scaler,
            )

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            if self.monitor is not None:
                step = max(trainer.global_step - 1, 0)
                self.monitor.step(epoch=trainer.current_epoch, step=step)

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            if self.monitor is not None:
                self.monitor.close()
                self.monitor = None

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self.on_train_end(trainer, pl_module)

    GradientAssuranceCallback.__module__ = __name__
    return GradientAssuranceCallback


def __getattr__(name: str) -> Any:
    if name == "GradientAssuranceCallback":
        cls = _build()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
