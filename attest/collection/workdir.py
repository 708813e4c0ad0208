"""The work folder of a collect: each finished phase's evidence, so a killed collect resumes.

As each phase of a collect finishes (``topology``, ``profile``, ``gradients``, ``ig``,
``export``, ``training``: one per check runner), its check results, its phase record and what
it hands on to the later phases (:mod:`attest.collection.phase_state`) are written, atomically,
to ``phase-NN-<phase>.json`` in the work folder. Each file also records what the results
depend on (:func:`identity`): the sha256 of the spec, weights and probe files, the attest
version, the collect settings (every check setting and the phases run) and the determinism
envelope (torch version, threads, CPU, device flags...), and the digest of the operators the
reference capture recorded.

``attest collect --resume DIR`` (``collect(..., work_dir=DIR, resume=True)``) reuses the
phases DIR holds, in order up to the first one missing, and runs the rest. It first compares
the identity with this collect's and refuses, naming what differs (the weights file's sha256,
the ig_tolerance setting, the torch version...), before any work; after its own reference
capture (run 0 holds tensors, never saved: it is always run again) it refuses when that
capture recorded other operators than the killed collect's. Every phase starts from the
collect's seed (:func:`attest.collection.pieces.reseed`), never from random state an earlier
phase consumed, so the resumed evidence is the uninterrupted one, timings aside
(tests/cli/test_cli_resume.py kills a real ``attest collect`` with SIGKILL to show it). A
reused phase's record says so (``PhaseRecord.reused``; its times and memory are the killed
process's). ``resume="auto"`` (a retried Ray task, which may land on another node) reuses
the phases when nothing differs and otherwise starts over, saying why, instead of refusing.

Where: ``<evidence folder>/.attest-work/<evidence file name>/`` by default
(:func:`default_work_dir`), or the folder given. After the evidence is written the phase
files are removed, then the folder (and ``.attest-work``) when nothing else is in them. A
collect started without ``--resume`` over a folder holding phases starts over (it removes
them first). A collect split over ``--workers`` or planned to a ``--budget`` keeps no work
folder (its phases are not one process's, or its plan depends on the time the killed process
spent).

``ATTEST_TEST_SIGKILL_AT_PHASE=<phase>`` (test-only, :data:`KILL_ENV`): the process sends
itself SIGKILL when that phase starts, after the earlier phases are saved, so a test can kill a
collect at a known point. It is read only when a work folder is in use.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from attest._version import __version__
from attest.collection.phase_state import reusable
from attest.core.io import atomic_write_text, read_json_file
from attest.errors import AttestError, CollectError, InputError
from attest.evidence.model import CheckResult, PhaseRecord

__all__ = [
    "KILL_ENV",
    "Resume",
    "SavedPhase",
    "WorkFolder",
    "default_work_dir",
    "identity",
]

# True: reuse the folder's phases, refusing other inputs; "auto": reuse them when they match,
# else start over (a retried Ray task); False: start over
Resume = bool | Literal["auto"]

FORMAT = "attest-collect-work/1"
KILL_ENV = "ATTEST_TEST_SIGKILL_AT_PHASE"
DEFAULT_FOLDER = ".attest-work"
# a phase file, or what a kill during its atomic write left (.phase-NN-x.json.XXXX.tmp)
_FILE = re.compile(r"^\.?phase-\d\d-[A-Za-z0-9_.-]+\.json(\.[A-Za-z0-9_]+\.tmp)?$")
# the work folder is this collect's own output: larger than the limit on files users give
_MAX_BYTES = 1 << 30


def default_work_dir(out: str | Path) -> Path:
    """``<evidence folder>/.attest-work/<evidence file name>/``: beside the output, one per
    evidence file."""
    path = Path(out).resolve()
    return path.parent / DEFAULT_FOLDER / path.name


def identity(
    artifacts: dict[str, dict[str, Any]],
    settings: Any,
    phases: list[str],
    environment: dict[str, Any],
) -> dict[str, Any]:
    """What a phase's results depend on besides the operators (module docstring): the files'
    sha256 by role, the attest version, the settings and phases, the determinism envelope."""
    values = {
        f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name != "extra"
    }
    values.update({f"extra.{k}": v for k, v in sorted(settings.extra.items())})
    values["phases"] = list(phases)
    # one JSON form for every value (tuples as lists, anything else as its repr)
    plain = json.loads(json.dumps(values, sort_keys=True, default=repr))
    return {
        "files": {role: entry["sha256"] for role, entry in sorted(artifacts.items())},
        "attest_version": __version__,
        "settings": plain,
        "environment": json.loads(json.dumps(environment, sort_keys=True, default=repr)),
    }


def _differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between a work folder's identity and this collect's, one phrase each."""
    found: list[str] = []
    files_then, files_now = saved.get("files", {}), now["files"]
    for role in sorted(set(files_then) | set(files_now)):
        a, b = files_then.get(role), files_now.get(role)
        if a != b:
            found.append(
                f"the {role} file's sha256 ({_short(a)} in the work folder, {_short(b)} now)"
            )
    if saved.get("attest_version") != now["attest_version"]:
        found.append(
            f"the attest version ({saved.get('attest_version')} in the work folder, "
            f"{now['attest_version']} now)"
        )
    for section, what in (("settings", "collect setting"), ("environment", "environment")):
        then, current = saved.get(section, {}), now[section]
        for key in sorted(set(then) | set(current)):
            if then.get(key) != current.get(key):
                found.append(
                    f"the {what} {key} ({then.get(key)!r} in the work folder, "
                    f"{current.get(key)!r} now)"
                )
    return found


def _short(digest: str | None) -> str:
    return "none" if digest is None else digest[:12]


@dataclass(frozen=True)
class SavedPhase:
    """One finished phase read back from the work folder."""

    phase: str
    results: list[CheckResult]
    record: PhaseRecord
    state: dict[str, Any]


def _file_name(index: int, phase: str) -> str:
    return f"phase-{index + 1:02d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', phase)}.json"


class WorkFolder:
    """The phase files of one collect (module docstring)."""

    def __init__(
        self,
        path: str | Path,
        ident: dict[str, Any],
        phases: list[str],
        *,
        resume: Resume,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.identity = ident
        self.phases = list(phases)
        self.progress = progress
        self.resume = resume
        self.operators: str | None = None
        self.saved: list[SavedPhase] = []
        self._saving = True
        self._pruned = False
        self._saved_operators: set[str | None] = set()
        if resume is True and not self.path.is_dir():
            raise InputError(
                f"--resume {self.path}: no such work folder",
                hint="give the work folder of the killed collect (by default "
                f"<evidence folder>/{DEFAULT_FOLDER}/<evidence file name>)",
            )
        if not resume:
            stale = self._remove_all()
            if stale:
                self._say(
                    f"starting over: removed {stale} phase file(s) of an earlier collect "
                    f"from {self.path} (continue a killed collect with --resume {self.path})"
                )
            return
        try:
            self._load()
        except AttestError as exc:
            if resume is True:
                raise
            self._start_over(exc.message)

    def _remove_all(self) -> int:
        stale = self._files()
        for old in stale:
            old.unlink(missing_ok=True)
        return len(stale)

    def _start_over(self, why: str) -> None:
        """``resume="auto"`` (a retried Ray task, perhaps on another node): what cannot be
        reused is removed and the collect starts over, saying why."""
        self.saved.clear()
        self._saved_operators.clear()
        self._remove_all()
        self._say(f"starting over: {why}")

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    def _files(self) -> list[Path]:
        if not self.path.is_dir():
            return []
        return sorted(p for p in self.path.iterdir() if _FILE.match(p.name))

    def _load(self) -> None:
        """The finished phases, in order up to the first one missing; refuse a folder made
        for other files, settings or environment, naming what differs."""
        for index, phase in enumerate(self.phases):
            path = self.path / _file_name(index, phase)
            if not path.is_file():
                break
            data = read_json_file(path, what="work folder phase file", max_bytes=_MAX_BYTES)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise InputError(
                    f"{path} is not a phase file of this attest version ({FORMAT})",
                    hint=f"remove {self.path} and collect again without --resume",
                )
            differences = _differences(data.get("identity") or {}, self.identity)
            if differences:
                raise InputError(
                    f"--resume {self.path}: the killed collect was made with other inputs than "
                    "this one, so its finished phases cannot be reused: " + "; ".join(differences),
                    hint="resume with the same spec, weights, probe, settings and environment, "
                    "or collect again without --resume",
                )
            self.saved.append(_parse(path, phase, data))
            self._saved_operators.add(data.get("operators_sha256"))

    def bind_operators(self, digest: str) -> None:
        """After this collect's reference capture: refuse to reuse phases measured on other
        operators; say which phases are reused."""
        self.operators = digest
        if not self.saved:
            if self.resume is True:
                self._say(f"resuming from {self.path}: no finished phase to reuse")
            return
        if self._saved_operators != {digest}:
            error = CollectError(
                f"--resume {self.path}: this collect's reference capture recorded other "
                "operators (or output shapes) than the killed collect's, so its finished "
                "phases would describe another run of the model",
                hint="collect again without --resume",
            )
            if self.resume is True:
                raise error
            self._start_over(error.message)
            return
        self._say(
            f"resuming from {self.path}: reusing {', '.join(s.phase for s in self.saved)} "
            "(finished by the killed collect)"
        )

    def reuse(self, index: int, phase: str, output_dir: Path | None) -> SavedPhase | None:
        """The saved phase at ``index`` when it can be put back now (``output_dir``: where
        this collect's exported files go); None: run it (and every later one)."""
        saved = self.saved[index] if index < len(self.saved) else None
        why = None if saved is None else reusable(phase, saved.state, output_dir)
        if saved is not None and why is None:
            return saved
        if why is not None:
            self._say(f"running {phase} again: {why}")
        if not self._pruned:  # the first phase run here: the files from it on are stale now
            self._pruned = True
            del self.saved[index:]
            for later in range(index, len(self.phases)):
                (self.path / _file_name(later, self.phases[later])).unlink(missing_ok=True)
        return None

    def begin(self, phase: str) -> None:
        """A phase starts. The test-only kill hook (module docstring) fires here."""
        if os.environ.get(KILL_ENV) == phase:
            os.kill(os.getpid(), signal.SIGKILL)

    def save(
        self,
        index: int,
        phase: str,
        results: list[CheckResult],
        record: PhaseRecord,
        state: Callable[[], dict[str, Any]],
    ) -> None:
        """Write a finished phase (atomically). A phase whose state cannot be encoded is not
        saved, nor is any after it: a resumed collect runs them again."""
        if not self._saving:
            return
        try:
            data = {
                "format": FORMAT,
                "phase": phase,
                "index": index,
                "identity": self.identity,
                "operators_sha256": self.operators,
                "results": [r.model_dump(mode="json") for r in results],
                "record": record.model_dump(mode="json"),
                "state": state(),
            }
            text = json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as exc:  # a value JSON (or the codec) cannot hold
            self._saving = False
            self._say(f"phase {phase} is not saved for --resume (it holds {exc})")
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path / _file_name(index, phase), text)
        except OSError as exc:
            raise CollectError(
                f"cannot write the work folder {self.path}: {exc}",
                hint="free space there, or give another folder with --work-dir",
            ) from None

    def clean(self) -> None:
        """Remove the phase files, then the folder and ``.attest-work`` when left empty."""
        for old in self._files():
            old.unlink(missing_ok=True)
        for folder in (self.path, self.path.parent):
            if folder is self.path.parent and folder.name != DEFAULT_FOLDER:
                break
            try:
                folder.rmdir()
            except OSError:  # not empty (someone else's files), or gone
                break


def _parse(path: Path, phase: str, data: dict[str, Any]) -> SavedPhase:
    try:
        results = [CheckResult.model_validate(r) for r in data["results"]]
        record = PhaseRecord.model_validate(data["record"]).model_copy(update={"reused": True})
        state = data["state"]
        if data.get("phase") != phase or not isinstance(state, dict):
            raise ValueError(f"it holds phase {data.get('phase')!r}, not {phase!r}")
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        raise InputError(
            f"{path} is not a valid phase file: {str(exc).splitlines()[0]}",
            hint="remove the work folder and collect again without --resume",
        ) from None
    return SavedPhase(phase=phase, results=results, record=record, state=state)
