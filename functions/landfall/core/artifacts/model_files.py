"""A champion's files by digest: what the verdict promoted is what the scorer loads (issue #66).

A champion is served from its folder in the bucket (``runs/<job>/model`` or ``runs/<job>/detectors/<name>``: a
SavedModel, ``normalization.json`` and ``threshold.json``; nothing is pickled). Whoever can write the bucket could
replace a file there after promotion, and every scorer loading it would then run a graph nobody chose. So the record
that makes it champion (``champion.json``'s ``files``) carries each file's SHA-256 by its path in the folder, taken
when it was promoted, and the scorer (``landfall.core.scoring.Scorer.load``) checks the files it downloaded against them
before TensorFlow reads one: a file changed, missing or added is one line naming the file, and the model is not
loaded (``Invalid``: permanent). A record without ``files`` (promoted before this) is loaded as it was.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from landfall.core.errors import Invalid
from landfall.core.services.storage import Storage, is_gs

CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def of_folder(folder: str | Path) -> dict[str, str]:
    """Every file under ``folder`` by its relative path (``/``-separated): its SHA-256, hex."""
    root = Path(folder)
    return {p.relative_to(root).as_posix(): _sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}


def of_model(storage: Storage, model: str) -> dict[str, str]:
    """Every file of the model folder ``model`` (gs:// or local) by its path in the folder: its SHA-256."""
    if not is_gs(model):
        return of_folder(model)
    prefix = model.rstrip("/") + "/"
    return {uri[len(prefix):]: hashlib.sha256(storage.read_bytes(uri)).hexdigest()
            for uri in sorted(storage.list(prefix)) if not uri.endswith("/")}


def check(folder: str | Path, expected: Mapping[str, Any] | None, model: str) -> None:
    """Raises ``Invalid`` (one line: the first file that differs, and how) when the files under ``folder`` (the
    downloaded copy of ``model``) are not exactly ``expected``; nothing to check without ``expected``."""
    if expected is None:
        return
    if not isinstance(expected, Mapping) or not all(isinstance(v, str) for v in expected.values()):
        raise Invalid(f"model {model}: its champion record's files are not a map of digests")
    found = of_folder(folder)
    for name in sorted(set(expected) | set(found)):
        if name not in found:
            raise Invalid(f"model {model}: {name} is missing (the champion was promoted with it)")
        if name not in expected:
            raise Invalid(f"model {model}: {name} was not among the files promoted (a file added since): not loaded")
        if found[name] != expected[name]:
            raise Invalid(f"model {model}: {name} differs from the file promoted (sha256 {found[name][:12]}, "
                          f"promoted {str(expected[name])[:12]}): tampered or replaced, not loaded")
