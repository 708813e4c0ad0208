"""An inference app that loads a MONAI bundle only after its certificate vouches for it.

    python app.py /models/spleen_ct --trust /etc/attest/trust.yaml \
        --require-policy clinical-strict@>=1 --state-file /var/lib/attest/state.json

1. ``attest.verification.verify_folder`` checks the bundle folder against
   ``gradient_certificate.json`` (beside the folder, or inside it): the signatures against the
   trust store, the validity window, the verdict, the policy, and every file of the folder
   (changed, missing or added files refuse it). Nothing heavy is imported for this: no torch,
   no MONAI.
2. Only then is the bundle loaded with MONAI's own ``ConfigParser`` (``network_def`` from
   configs/inference.json, weights from models/model.pt) and run once on an input shaped as
   configs/metadata.json's ``network_data_format`` says (a symbolic size such as the Model
   Zoo's ``"16*n"`` or ``"2**p"`` taken at n = p = 1, with MONAI's own evaluator).

The bundle may be certified as the model (``attest certify BUNDLE/``) or as a folder bound
beside a spec (``attest certify attest.yaml --artifact BUNDLE/``): either way it is one subject
bound through its manifest, and the gate is the same.

Exit codes as ``attest verify``: 0 served, 1 refused (each reason printed), 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from attest.errors import AttestError
from attest.verification import FolderRejected, verify_folder


def gate(bundle: Path, args: argparse.Namespace) -> None:
    """Verify the bundle or exit: no model code runs for a folder that is not certified."""
    try:
        verified = verify_folder(
            bundle,
            trust=args.trust,
            require_policy=args.require_policy,
            certificate=args.certificate,
            state_file=args.state_file,
        )
    except FolderRejected as rejected:
        for code, message in rejected.report.reasons:
            print(f"refused: {code}: {message}", file=sys.stderr)
        raise SystemExit(rejected.exit_code) from None
    except AttestError as error:
        print(error.diagnostics(), file=sys.stderr)
        raise SystemExit(error.exit_code) from None
    model, policy = verified.model, verified.policy
    print(
        f"verified {model['name']} {model['version']} under {policy['id']} {policy['version']}: "
        f"{len(verified.files)} files, certificate {verified.certificate_id}"
    )


def example_size(size: Any) -> int:
    """A spatial size the network takes: an int as is, ``"*"`` as 16, an expression of MONAI's
    (``"16*n"``, ``"2**p"``) at n = p = 1, evaluated as ``monai.bundle`` evaluates it."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    if str(size).strip() == "*":
        return 16
    import numpy as np
    from monai.utils.safeeval import safe_eval

    one = np.int64(1)
    return int(safe_eval(str(size), {"n": one, "p": one}, rewrite_np=True))


def load_and_run(bundle: Path) -> Any:
    """Load the verified bundle with MONAI and run it once (imports torch and MONAI now)."""
    import torch
    from monai.bundle import ConfigParser

    parser = ConfigParser()
    parser.read_meta(bundle / "configs" / "metadata.json")
    parser.read_config(bundle / "configs" / "inference.json")
    network = parser.get_parsed_content("network_def")
    state = torch.load(bundle / "models" / "model.pt", map_location="cpu", weights_only=True)
    network.load_state_dict(state)
    network.eval()
    image = parser.get("_meta_#network_data_format#inputs#image")
    shape = (1, int(image["num_channels"]), *[example_size(n) for n in image["spatial_shape"]])
    with torch.no_grad():
        output = network(torch.zeros(shape, dtype=getattr(torch, image.get("dtype", "float32"))))
    print(f"ran {type(network).__name__} on {list(shape)}: output {list(output.shape)}")
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="the MONAI bundle folder")
    parser.add_argument("--trust", required=True, help="the trust store (trust.yaml)")
    parser.add_argument("--require-policy", action="append", default=[], metavar="ID[@>=V]")
    parser.add_argument("--certificate", default=None, help="default: beside or inside the bundle")
    parser.add_argument("--state-file", default=None, help="rollback protection state")
    args = parser.parse_args(argv)
    gate(args.bundle, args)
    load_and_run(args.bundle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
