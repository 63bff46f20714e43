"""Every image's build, rehearsed (tests/infra/images.py says how, and what it cannot do): the trainer, the converter
and the scorer images, each from its own Dockerfile's steps, in a fresh environment, with its entry point started.
Then the set each image resolved is the set this suite runs on: the tests of behaviour ran on what deploys.

The scorer's image ships the landfall package alone (issue #66): its rehearsal also serves a trained model and a
row-scoring detector in it, with the trainer, bench/, scikit-learn and tf-keras absent.

Cost: three fresh installs from the package index (pip keeps no cache here), about 25 s for the converter and 45 s
each for the two TensorFlow images on the 2-core machine, spread over the suite's workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from .images import BASES, RehearsalFailed, context_files, normalise, probe, rehearse, suite_distributions
from .tools import REPO

IMAGES = {
    "trainer": REPO / "trainer" / "Dockerfile",
    "converter": REPO / "converter" / "Dockerfile",
    "scorer": REPO / "scorer" / "Dockerfile",
}
PROJECT = {"landfall"}  # installed from the context in the image, editable in the suite's venv


def differences(image: dict[str, str], suite: dict[str, str], stand_ins: set[str]) -> list[str]:
    """Distributions the image resolved at another version than the suite runs, or that the suite lacks."""
    out = []
    for name, version in sorted(image.items()):
        if name in PROJECT | stand_ins or name in ("pip", "setuptools", "wheel"):
            continue
        if name not in suite:
            out.append(f"{name} {version}: in the image, not in the suite's venv")
        elif suite[name] != version:
            out.append(f"{name}: the image resolves {version}, the suite runs {suite[name]}")
    return out


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_the_image_builds_from_its_steps_and_deploys_what_the_suite_tested(image: str, tmp_path: Path) -> None:
    dockerfile = IMAGES[image]
    rh = rehearse(dockerfile, REPO, tmp_path)
    assert any(s.startswith("RUN pip install") for s in rh.steps), rh.steps
    assert any(s.startswith("RUN python -c") for s in rh.steps), rh.steps  # each image checks its install
    assert not (rh.root / "opt" / "landfall" / "src").exists()  # removed: the entry point runs from site-packages
    out = probe(rh)
    if image == "scorer":
        assert out.startswith("HTTP "), out
        serves_champions_without_the_trainer(rh, tmp_path / "champions")
    else:
        assert out.startswith("usage: "), out
    assert {s.split(":")[0] for s in rh.skipped} <= {"RUN groupadd --gid 10001 landfall", "RUN useradd --uid 10001 "
                                                     "--gid 10001 --create-home --home-dir /home/landfall --shell "
                                                     "/usr/sbin/nologin landfall"}, rh.skipped
    stand_ins = {normalise(n) for n in BASES[rh.base]["packages"]}
    assert differences(rh.distributions(), suite_distributions(), stand_ins) == [], (
        f"{image}: the image would deploy other versions than the suite tested; rebuild the suite's venv "
        "(make clean test) or bound the range in pyproject.toml")


SERVE = """
import json, sys
import numpy as np
from landfall.core.scoring import Scorer
x = np.load(sys.argv[2])
out = {}
for name in sys.argv[3:]:
    scorer = Scorer.load(None, f"{sys.argv[1]}/{name}")
    out[name] = scorer.row_errors(x).tolist()
import importlib.util as u
out["shipped"] = sorted(m for m in ("trainer", "landfall_bench", "sklearn", "tf_keras") if u.find_spec(m))
print(json.dumps(out))
"""


def serves_champions_without_the_trainer(rh, folder: Path) -> None:
    """The scorer image serves both kinds of champion the trainer saves, with neither the trainer, bench/,
    scikit-learn nor tf-keras in it (issue #66): the seed's GRU autoencoder saved as a job saves it (tf-keras,
    ``trainer.train.save_served``), and a row-scoring detector (``pca_rows``, ``trainer.judging.detectors.save``).
    Each scores the same rows in the image as in the suite."""
    import json
    import os
    import subprocess

    import numpy as np

    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    from landfall.core.scoring import Scorer
    from trainer.judging import baselines, detectors
    from trainer.train import save_served
    from trainer.training import model_kinds

    rng = np.random.default_rng(0)
    x = (np.sin(np.arange(12)[None, :, None] * 0.5 + rng.uniform(0, 6, (200, 1, 3))) + rng.normal(0, 0.05, (200, 12, 3))
         ).astype(np.float32)
    folder.mkdir(parents=True)
    save_served(model_kinds.build("gru", 12, 3, [4, 2], 0.0), folder / "gru", (12, 3))
    (folder / "gru" / "normalization.json").write_text(json.dumps({"shape": [12, 3], "dtype": "float32",
                                                                   "normalized": False}))
    flat = x.reshape(-1, 3)
    panel = baselines.Panel.fit([x[:100], x[100:]], len(x), flat.mean(0), flat.std(0), (12, 3), 4)
    detectors.save(panel, "pca_rows", folder / "pca_rows")
    np.save(folder / "x.npy", x[:20])
    proc = subprocess.run([str(rh.venv / "bin" / "python"), "-c", SERVE, str(folder), str(folder / "x.npy"), "gru",
                           "pca_rows"], capture_output=True, text=True, env=rh.run_env(), cwd=rh.root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.strip().splitlines()[-1])
    assert served.pop("shipped") == []
    for name in ("gru", "pca_rows"):
        here = Scorer.load(None, str(folder / name)).row_errors(x[:20])
        np.testing.assert_allclose(served[name], here, rtol=1e-4, atol=1e-6)


def test_a_stale_module_in_a_build_check_fails_the_rehearsal(tmp_path: Path) -> None:
    """The converter image once verified an import of a module that had moved (landfall.core.services.cloudrun ->
    landfall.arrival.cloudrun), so `docker build` failed. A build check naming that module stops the rehearsal at
    its step, naming the module. The package is put on PYTHONPATH as the scorer's image does, so no install is needed
    to show it (each image's own check runs in its rehearsal above); the real converter check names the new module."""
    assert "import landfall.arrival.task, landfall.arrival.cloudrun" in IMAGES["converter"].read_text()
    stale = tmp_path / "Dockerfile"
    stale.write_text("FROM python:3.11.13-slim-bookworm\nENV PYTHONPATH=/opt/landfall/lib\nWORKDIR /opt/landfall\n"
                     "COPY functions/landfall /opt/landfall/lib/landfall\n"
                     'RUN python -c "import landfall.core.errors, landfall.core.services.cloudrun"\n')
    with pytest.raises(RehearsalFailed, match=r"No module named 'landfall\.core\.services\.cloudrun'"):
        rehearse(stale, REPO, tmp_path / "build")
    stale.write_text(stale.read_text().replace("landfall.core.services.cloudrun", "landfall.core.contracts"))
    assert rehearse(stale, REPO, tmp_path / "again").steps[-1].startswith("RUN python -c")  # the module that is there


def test_the_context_is_dockerignores_and_copy_of_an_excluded_path_fails(tmp_path: Path) -> None:
    """Docker's own rules through docker-py: the negations let the packages in, `**/__pycache__` keeps bytecode out,
    and a COPY of a path the context lacks fails as `docker build` does."""
    files = context_files(REPO, IMAGES["trainer"])
    assert "trainer/task.py" in files and "functions/landfall/arrival/task.py" in files
    assert "scorer/main.py" in files and "scorer/Dockerfile" not in files
    assert not any("__pycache__" in f or f.startswith(("tests/", ".venv", "infra/")) for f in files)
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:3.11.13-slim-bookworm\nWORKDIR /opt/x\nCOPY tests ./tests\n")
    with pytest.raises(RehearsalFailed, match=r"COPY tests: not found in the build context"):
        rehearse(bad, REPO, tmp_path / "build")
    unknown = tmp_path / "Dockerfile.curl"
    unknown.write_text("FROM python:3.11.13-slim-bookworm\nRUN curl -sSf https://example.invalid/x | sh\n")
    with pytest.raises(RehearsalFailed, match="does not know `curl`"):
        rehearse(unknown, REPO, tmp_path / "build2")
