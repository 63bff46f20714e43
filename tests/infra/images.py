"""A rehearsal of an image's build, where no Docker engine runs: what ``docker build -f <Dockerfile> .`` does, step by
step, on this machine (tests/infra/test_images.py).

- **The build context** is the one Docker sends: the repository filtered by ``.dockerignore``, matched by docker-py's
  own implementation of Docker's rules (``docker.utils.build.exclude_paths``), not by a matcher written here.
- **The Dockerfile** is read by ``dockerfile-parse`` (the parser Red Hat's container build system uses).
- **FROM** becomes a fresh virtual environment on this interpreter's Python minor, which must be the base image's
  (``BASES``: what each base image brings, as data). A base image that carries Python packages gets them first: the
  TensorFlow GPU image's ``tensorflow`` is stood in by ``tensorflow-cpu`` of the same version, registered under the
  name ``tensorflow`` so that pip finds it satisfied, as it does in the image (no GPU wheel is downloaded here).
- **COPY** copies from the context into a folder that stands for the image's root filesystem; a source missing
  from the context (absent, or excluded by ``.dockerignore``) fails as Docker fails.
- **RUN** runs each ``&&``-joined command: ``pip`` and ``python`` in the environment, ``rm`` on the stand-in root;
  ``groupadd`` and ``useradd`` are listed as not rehearsed (they need the image's own ``/etc``); any other command
  fails the rehearsal, so a Dockerfile that grows a new kind of step makes this module grow with it.
- **ENTRYPOINT** is started far enough to show that it imports: an exec form with ``--help``, and the scorer's
  functions-framework until it answers HTTP on its ``$PORT``.

What it cannot do: pull a base image (none is reachable), so the base's own contents are the data in ``BASES``; run
as the image's user; build layers or push to a registry. Paths that a command names under the image's root
(``/opt/...``) are mapped into the stand-in root.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path, PurePosixPath

from docker.utils.build import exclude_paths
from dockerfile_parse import DockerfileParser

# What each base image brings, read from its tag and its publisher's page (read 2026-12-05). `python` is the minor
# the rehearsal's environment must have; `packages` the Python distributions the base already carries, with the
# stand-in the rehearsal installs for each (name in the image, what is installed here).
BASES: dict[str, dict] = {
    # https://hub.docker.com/_/python: the tag names CPython 3.11.13 on Debian bookworm, pip and nothing else.
    "python:3.11.13-slim-bookworm": {"python": "3.11", "packages": {}},
    # https://hub.docker.com/r/tensorflow/tensorflow (tags `X.Y.Z-gpu`): the `tensorflow` wheel X.Y.Z with CUDA
    # and cuDNN, on the image's Python 3.11. Here: tensorflow-cpu of the same version stands in for the wheel.
    "tensorflow/tensorflow:2.21.0-gpu": {"python": "3.11", "packages": {"tensorflow": ("tensorflow-cpu", "2.21.0")}},
}

NOT_REHEARSED = {"groupadd", "useradd"}  # they write the image's /etc: nothing to check outside it


class RehearsalFailed(AssertionError):
    """A step the real build would fail at, with Docker's words where it has them."""


@dataclass
class Rehearsal:
    dockerfile: Path
    root: Path  # stands for the image's root filesystem
    venv: Path  # the image's Python environment
    env: dict[str, str] = field(default_factory=dict)
    workdir: PurePosixPath = field(default_factory=lambda: PurePosixPath("/"))
    entrypoint: list[str] = field(default_factory=list)
    user: str = ""
    base: str = ""  # the FROM image
    steps: list[str] = field(default_factory=list)  # one line per step: what was done
    skipped: list[str] = field(default_factory=list)  # commands not rehearsed, and why

    def host(self, path: str | PurePosixPath) -> Path:
        """An absolute path of the image, inside the stand-in root."""
        return self.root / PurePosixPath(self.workdir, path).relative_to("/")

    def run_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "LANDFALL_"))}
        env.update({k: self.map_paths(v) for k, v in self.env.items()})  # PYTHONPATH=/opt/... into the stand-in root
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        # pip installs without byte-compiling: what resolves and imports is the same, and compiling every module of
        # TensorFlow costs the rehearsal a third of its install's CPU (issue #67); the image compiles as it builds.
        env["PIP_NO_COMPILE"] = "1"
        return env

    def map_paths(self, text: str) -> str:
        """Absolute paths under a top folder the stand-in root has (``/opt/...``, ``/home/...``) moved into it."""
        tops = "|".join(re.escape(p.name) for p in self.root.iterdir())
        return re.sub(rf"(?<![\w$/.-])/(?:{tops})(?=/|\b)", lambda m: str(self.root) + m.group(0), text) if tops \
            else text

    def distributions(self) -> dict[str, str]:
        """The environment's distributions, ``name: version`` (names normalised)."""
        code = ("import json, importlib.metadata as m; print(json.dumps({d.metadata['Name']: d.version "
                "for d in m.distributions()}))")
        out = subprocess.run([str(self.venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                             check=True, env=self.run_env(), cwd=self.root)
        return {normalise(k): v for k, v in json.loads(out.stdout).items()}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def context_files(root: Path, dockerfile: Path) -> set[str]:
    """The build context's files (POSIX paths relative to ``root``), as Docker makes it from ``.dockerignore``."""
    ignore = root / ".dockerignore"
    patterns = []
    if ignore.exists():  # docker-py's reading of the file: blank lines and comments dropped, each line stripped
        patterns = [ln.strip() for ln in ignore.read_text().splitlines() if ln.strip() and ln.strip()[0] != "#"]
    inside = dockerfile.is_relative_to(root)  # `docker build -f` with a file elsewhere: it is not in the context
    included = exclude_paths(str(root), patterns, dockerfile=str(dockerfile.relative_to(root)) if inside else None)
    return {p for p in included if (root / p).is_file()}


def _sh(args: list[str], rh: Rehearsal, what: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=rh.host(rh.workdir), env=rh.run_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise RehearsalFailed(f"{rh.dockerfile.name}: {what} exited {proc.returncode}:\n{tail}")
    return proc


def _from(rh: Rehearsal, image: str) -> None:
    base = BASES.get(image)
    if base is None:
        raise RehearsalFailed(f"FROM {image}: no entry in tests/infra/images.py BASES (what the base brings)")
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    if base["python"] != minor:
        raise RehearsalFailed(f"FROM {image}: the image runs Python {base['python']}, this rehearsal {minor}")
    rh.base = image
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(rh.venv)], check=True)
    for name, (stand_in, version) in base["packages"].items():
        _sh([str(rh.venv / "bin" / "pip"), "install", "-q", f"{stand_in}=={version}"], rh,
            f"FROM {image}: installing {stand_in} {version} for the image's {name}")
        purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
        site = Path(_sh([str(rh.venv / "bin" / "python"), "-c", purelib], rh, "site-packages").stdout.strip())
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                       f"Summary: the base image's {name}, stood in by {stand_in} {version}\n")
        (info / "INSTALLER").write_text("landfall-rehearsal\n")
        (info / "RECORD").write_text("")
    rh.steps.append(f"FROM {image}: Python {minor} venv" + "".join(f", {n} as {s}" for n, (s, _) in
                                                                      base["packages"].items()))


def _copy(rh: Rehearsal, args: list[str], context: Path, files: set[str]) -> None:
    args = [a for a in args if not a.startswith("--")]
    *sources, dest = args
    many = len(sources) > 1
    if many and not dest.endswith("/"):
        raise RehearsalFailed(f"COPY {' '.join(args)}: when using COPY with more than one source file, "
                              "the destination must be a directory and end with a /")
    for src in sources:
        src = src.rstrip("/").removeprefix("./")
        under = sorted(f for f in files if f == src or f.startswith(src + "/"))
        if not under:
            raise RehearsalFailed(f"COPY {src}: not found in the build context (missing, or excluded by "
                                  ".dockerignore): \"/{src}\": not found")
        for f in under:
            if f == src:  # a file: into the folder dest names, or as dest
                target = rh.host(dest) / PurePosixPath(f).name if dest.endswith("/") else rh.host(dest)
            else:  # a folder: its contents into dest
                target = rh.host(dest) / PurePosixPath(f).relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(context / f, target)
        rh.steps.append(f"COPY {src} -> {dest}: {len(under)} file(s)")


def _run(rh: Rehearsal, command: str) -> None:
    argv = shlex.split(command)
    commands: list[list[str]] = [[]]
    for token in argv:
        if token == "&&":
            commands.append([])
        else:
            commands[-1].append(token)
    for cmd in commands:
        prog = cmd[0]
        if prog in ("pip", "python"):
            args = [str(rh.venv / "bin" / prog), *(rh.map_paths(a) if a.startswith("/") else a for a in cmd[1:])]
            _sh(args, rh, f"RUN {shlex.join(cmd)}")
            rh.steps.append(f"RUN {shlex.join(cmd)}")
        elif prog == "rm":
            for target in [a for a in cmd[1:] if not a.startswith("-")]:
                if not target.startswith("/"):
                    target = str(PurePosixPath(rh.workdir, target))
                shutil.rmtree(rh.host(target), ignore_errors=True)
            rh.steps.append(f"RUN {shlex.join(cmd)}")
        elif prog in NOT_REHEARSED:
            rh.skipped.append(f"RUN {shlex.join(cmd)}: writes the image's /etc, not rehearsed")
        else:
            raise RehearsalFailed(f"RUN {shlex.join(cmd)}: the rehearsal does not know `{prog}` "
                                  "(tests/infra/images.py: teach it, or say why it cannot be rehearsed)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe(rh: Rehearsal, timeout: float = 180) -> str:
    """Starts the entry point far enough to show that it imports. An exec form (``python -m X``) runs with
    ``--help``; a shell form serving on ``$PORT`` (the scorer's functions-framework) must answer HTTP there."""
    rh.host(rh.workdir).mkdir(parents=True, exist_ok=True)
    entry = rh.entrypoint
    if entry[:2] == ["/bin/sh", "-c"]:
        port = _free_port()
        env = {**rh.run_env(), "PORT": str(port)}
        proc = subprocess.Popen(["/bin/sh", "-c", rh.map_paths(entry[2])], cwd=rh.host(rh.workdir), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RehearsalFailed(f"ENTRYPOINT exited {proc.returncode} before serving:\n"
                                          + "\n".join(proc.stdout.read().splitlines()[-15:]))
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
                    status = 200
                except urllib.error.HTTPError as exc:  # an answer all the same: the app was built
                    status = exc.code
                except OSError:
                    time.sleep(0.5)
                    continue
                rh.steps.append(f"ENTRYPOINT served on $PORT, answered HTTP {status}")
                return f"HTTP {status}"
            raise RehearsalFailed(f"ENTRYPOINT did not serve on $PORT within {timeout:.0f} s")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    prog, *args = entry
    if prog not in ("python", "pip"):
        raise RehearsalFailed(f"ENTRYPOINT {entry}: the rehearsal starts python entry points only")
    out = _sh([str(rh.venv / "bin" / prog), *args, "--help"], rh, f"ENTRYPOINT {shlex.join(entry)} --help",
              timeout=timeout)
    rh.steps.append(f"ENTRYPOINT {shlex.join(entry)} --help: exit 0")
    return out.stdout


def rehearse(dockerfile: Path, context: Path, work: Path) -> Rehearsal:
    """Every step of ``dockerfile`` built with ``context`` as Docker's build context, into ``work``; then the entry
    point probed. Raises ``RehearsalFailed`` at the step the real build (or the image's start) would fail at."""
    parser = DockerfileParser(fileobj=dockerfile.open("rb"))
    files = context_files(context, dockerfile)
    rh = Rehearsal(dockerfile=dockerfile, root=work / "root", venv=work / "venv")
    rh.root.mkdir(parents=True)
    for ins in parser.structure:
        kind, value = ins["instruction"], ins["value"]
        if kind == "FROM":
            _from(rh, value.split()[0])
        elif kind == "ENV":
            rh.env.update(parser.envs)  # the parser resolves every ENV line's pairs
        elif kind == "WORKDIR":
            rh.workdir = PurePosixPath(rh.workdir, value)
            rh.host(rh.workdir).mkdir(parents=True, exist_ok=True)
        elif kind == "COPY":
            _copy(rh, shlex.split(value), context, files)
        elif kind == "RUN":
            _run(rh, value)
        elif kind == "USER":
            rh.user = value
        elif kind == "ENTRYPOINT":
            rh.entrypoint = json.loads(value)
        elif kind not in ("COMMENT", "LABEL", "EXPOSE", "CMD"):
            raise RehearsalFailed(f"{kind} {value}: the rehearsal does not know this instruction")
    return rh


def suite_distributions() -> dict[str, str]:
    """The distributions this test suite runs on (its own venv)."""
    return {normalise(d.metadata["Name"]): d.version for d in metadata.distributions()}
