"""The server side: everything `attest verify` runs (envelope, trust store, artifacts, rollback,
probe). Free of torch and numpy (numpy only in the optional probe); this __init__ imports nothing."""

from typing import Any

_LAZY = {  # the inference-app gate, imported on first use (this __init__ stays import-free)
    "verify_folder": "attest.verification.folder_gate",
    "FolderVerification": "attest.verification.folder_gate",
    "FolderRejected": "attest.verification.folder_gate",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
