"""``attest collect --ray``: a real local Ray cluster (``ray start --head``, two worker CPUs,
one custom resource) running real collect tasks, then ``attest certify --evidence`` on what
came back. One test kills a worker process in the middle of its task (Ray retries it).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _collect_models import MLP, make_spec, stable

from attest.certificate.signing import generate_keypair
from attest.collection import collect
from attest.verification.trust import add_key, empty_trust_store, save_trust_store

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

pytestmark = [pytest.mark.slow, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[2]
# A model slow enough (every forward sleeps) for a test to kill its worker mid-task.
SLOW = MLP.replace(
    "def build(width=16):",
    "class Slow(nn.Module):\n"
    "    def __init__(self, inner):\n"
    "        super().__init__()\n"
    "        self.inner = inner\n"
    "    def forward(self, x):\n"
    "        import time\n"
    "        time.sleep(0.02)\n"
    "        return self.inner(x)\n\n"
    "def build_slow():\n"
    "    return Slow(build())\n\n"
    "def build(width=16):",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A head node on 127.0.0.1 with 2 CPUs and the custom resource ``avx512``, token-auth on."""
    temp = tmp_path_factory.mktemp("ray")
    env = dict(os.environ)
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    ray_cli = str(Path(sys.executable).with_name("ray"))
    port = _free_port()
    started = subprocess.run(
        [
            ray_cli,
            "start",
            "--head",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            '--resources={"avx512": 1}',
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}", env
    finally:
        subprocess.run([ray_cli, "stop", "--force"], env=env, capture_output=True, timeout=120)


def _attest(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "attest", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _collect(
    spec: Path, address: str, targets: Path, out: Path, env: dict[str, str], *extra: str
) -> subprocess.Popen[str]:
    """``attest collect SPEC --ray ADDRESS --targets TARGETS -o OUT``, started."""
    return _attest(
        "collect", str(spec), "--ray", address, "--targets", str(targets), "-o", str(out), *extra,
        env=env,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str], timeout: float = 600) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    assert "Traceback" not in err, err[-3000:]
    return proc.returncode, out, err


def test_two_targets_collected_and_signed_on_their_nodes_then_certified(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    """Each target names its own collector key in targets.yaml (a path on its node: here the
    one node); each is signed in its task, and certify --trust names each collector."""
    address, env = cluster
    spec = make_spec(tmp_path / "model", spec_extra="repeats: 3\nthreads: 1\n")
    keys = {n: generate_keypair(tmp_path / "nodes" / n, passphrase=None) for n in ("a", "b")}
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        f"plain: {{num_cpus: 1, collector_key: '{keys['a'][0]}', collector_name: pool-plain}}\n"
        f"wide: {{num_cpus: 1, resources: {{avx512: 1}}, collector_key: '{keys['b'][0]}'}}\n"
    )
    out = tmp_path / "run" / "evidence.json"
    code, text, err = _finish(_collect(spec, address, targets, out, env))
    assert code == 0, err[-3000:]
    assert "target plain: running, attempt 1" in err and "target wide: done" in err
    assert "target plain: signed on its node by pool-plain" in text
    assert "target wide: signed on its node by b (key" in text
    merged = json.loads(out.read_text())
    assert merged["targets"] == ["plain", "wide"]
    records = {r["target"]: r for r in merged["dispatch"]}
    assert records["wide"]["requested"]["resources"] == {"avx512": 1.0}
    assert records["plain"]["attempts"] == records["wide"]["attempts"] == 1
    per_target = [out.parent / "evidence.targets" / n / "evidence.json" for n in ("plain", "wide")]
    digests = {json.loads(p.read_text())["artifacts"]["weights"]["sha256"] for p in per_target}
    assert len(digests) == 1  # both read exactly the bytes the driver sent

    key, release_pub, _ = generate_keypair(tmp_path / "release", passphrase=None)
    store = empty_trust_store(str(tmp_path / "trust.yaml"))
    for pub, name, roles in ((release_pub, "release", ()),
                             (keys["a"][1], "pool-plain", ("collector",)),
                             (keys["b"][1], "b", ("collector",))):  # fmt: skip
        store, _ = add_key(store, pub.read_bytes(), name=name, roles=roles)
    trust = save_trust_store(store, tmp_path / "trust.yaml")
    policy = tmp_path / "signed-research.yaml"  # research, requiring signed evidence
    policy.write_text(
        "extends: research\nid: signed-research\nversion: '1'\n"
        "evidence: {require_signed: true, collectors: [collector]}\n"
    )
    args = [
        "certify",
        str(spec),
        "--policy",
        str(policy),
        "--key",
        str(key),
        "--json",
        "-q",
        "-o",
        str(tmp_path / "cert" / "gradient_certificate.json"),
        "--trust",
        str(trust),
    ]
    for name, path in zip(("plain", "wide"), per_target, strict=True):
        args += ["--evidence", f"{name}={path}"]
    code, text, err = _finish(_attest(*args, env=env))
    summary = json.loads(text)
    assert [(t["name"], t["required"]) for t in summary["targets"]] == [
        ("plain", True),
        ("wide", True),
    ]
    assert code == 0, summary["failed"]
    envelope = json.loads((tmp_path / "cert" / "gradient_certificate.json").read_text())
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    records = predicate["evidence_provenance"]
    assert {n: (r["signed"], r["collector"]["name"]) for n, r in records.items()} == {
        "plain": (True, "pool-plain"),
        "wide": (True, "b"),
    }
    assert records["plain"]["collector"]["keyid"] != records["wide"]["collector"]["keyid"]


def _slow_spec(folder: Path) -> Path:
    """A spec folder of the :data:`SLOW` model; its attest.yaml."""
    make_spec(folder, SLOW, spec_extra="repeats: 3\nthreads: 1\n")
    spec = folder / "attest.yaml"
    spec.write_text(spec.read_text().replace("factory: model:build", "factory: model:build_slow"))
    # the slow wrapper's weights carry the inner model under "inner."
    shutil.move(folder / "weights.safetensors", folder / "inner.safetensors")
    from safetensors.torch import load_file, save_file

    save_file(
        {f"inner.{k}": v for k, v in load_file(str(folder / "inner.safetensors")).items()},
        str(folder / "weights.safetensors"),
    )
    (folder / "inner.safetensors").unlink()
    return spec


def test_a_worker_killed_after_two_phases_is_retried_and_resumes(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    """The retry finds the phases the killed attempt finished in the work folder (--work-dir:
    storage every node sees) and reuses them instead of starting over."""
    address, env = cluster
    spec = _slow_spec(tmp_path / "slow")
    targets = tmp_path / "targets.yaml"
    targets.write_text("only: {num_cpus: 1, max_retries: 2}\n")
    out = tmp_path / "run" / "evidence.json"
    work = tmp_path / "work"
    proc = _collect(spec, address, targets, out, env, "--work-dir", str(work))
    assert proc.stderr is not None
    pid = None
    lines: list[str] = []
    while pid is None:
        line = proc.stderr.readline()
        assert line, "".join(lines)
        lines.append(line)
        if "target only: running, attempt 1 (pid " in line:
            pid = int(line.split("(pid ")[1].split()[0])
    deadline = time.monotonic() + 300
    while not list(work.glob("*/only/phase-02-profile.json")):
        assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    code, _, err = _finish(proc)
    assert code == 0, "".join(lines) + err[-3000:]
    assert "target only: running, attempt 2" in err
    evidence = json.loads(out.read_text())
    assert evidence["dispatch"][0]["attempts"] == 2
    reused = [p["phase"] for p in evidence["phases"] if p.get("reused")]
    assert reused[:2] == ["topology", "profile"], evidence["phases"]
    assert not list(work.glob("*/only")), "the target's work folder is removed after success"


def test_a_worker_killed_mid_task_is_retried_and_recorded(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, env = cluster
    spec = _slow_spec(tmp_path / "slow")
    targets = tmp_path / "targets.yaml"
    targets.write_text("only: {num_cpus: 1, max_retries: 2}\n")
    out = tmp_path / "run" / "evidence.json"
    proc = _collect(spec, address, targets, out, env)
    assert proc.stderr is not None
    killed = None
    deadline = time.monotonic() + 300
    lines: list[str] = []
    while killed is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if "target only: running, attempt 1 (pid " in line:
            killed = int(line.split("(pid ")[1].split()[0])
            os.kill(killed, signal.SIGKILL)
    assert killed is not None, "".join(lines)
    code, _, err = _finish(proc)
    assert code == 0, "".join(lines) + err[-3000:]
    assert "target only: running, attempt 2" in err
    record = json.loads(out.read_text())["dispatch"][0]
    assert record["attempts"] == 2


def test_a_target_no_node_can_serve_fails_naming_the_resource(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, env = cluster
    spec = make_spec(tmp_path / "model", spec_extra="repeats: 3\nthreads: 1\n")
    targets = tmp_path / "targets.yaml"
    targets.write_text("here: {num_cpus: 1}\na100: {num_gpus: 1, accelerator_type: A100}\n")
    out = tmp_path / "run" / "evidence.json"
    code, _, err = _finish(_collect(spec, address, targets, out, env, "--schedule-timeout", "2s"))
    assert code != 0
    assert "target a100: no node of the Ray cluster can run it" in err
    assert "GPU 1" in err and "accelerator_type:A100" in err
    assert not out.exists()


def test_one_collect_split_over_ray_tasks(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, env = cluster
    spec = make_spec(tmp_path / "model", spec_extra="repeats: 3\nthreads: 1\n")
    out = tmp_path / "run" / "evidence.json"
    code, _, err = _finish(
        _attest("collect", str(spec), "--ray", address, "--workers", "2", "-o", str(out), env=env)
    )
    assert code == 0, err[-3000:]
    evidence = json.loads(out.read_text())
    assert {p["worker"] for p in evidence["phases"]} == {None, 1}
    statuses = {c["status"] for c in evidence["checks"].values()}
    assert statuses <= {"computed", "not_applicable"}, evidence["checks"]
    # the runners' pieces went to both processes, and the checks are one process's, bit for bit
    ran = {(p["phase"], p["worker"]) for p in evidence["phases"] if p.get("pieces")}
    assert any((phase, 1) in ran and (phase, None) in ran for phase, _ in ran), ran
    one = collect(spec).model_dump(mode="json")
    assert stable(one["checks"]) == stable(evidence["checks"])
    assert one["attributions"] == evidence["attributions"]
