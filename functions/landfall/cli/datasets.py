"""``landfall datasets validate|apply|show|list``: the dataset specs (``landfall.core.artifacts.specs``,
docs/datasets.md).

- ``validate PATH...``: files (``.yaml``, ``.yml``, ``.json``) or folders of them; no bucket needed. Each file's
  name (less its extension) must be the dataset it names, so a reviewed folder has one file per dataset.
- ``apply PATH...``: validates every file first and applies none if one is invalid; then writes each as a new
  generation of ``gs://BUCKET/config/datasets/<name>.json``, over the generation it read (``--if-generation``:
  over that one, for a single file), and leaves an unchanged spec as it is (no new generation).
- A spec's labelled evaluation file (``verdict.labelled.file``: a path relative to the spec file, inside its
  folder, or a ``gs://`` URI) is read with the converter's readers and its labels checked
  (``landfall.arrival.labelled_file``; a series dataset's is a labelled recording,
  ``landfall.arrival.labelled_recording``) by ``validate`` (local files) and ``apply`` (all of them, before anything is
  written). ``apply`` stores it create-only as ``gs://BUCKET/config/labelled/<name>/<sha256>.npz`` and its manifest
  (``landfall.core.artifacts.labelled``), then records that URI in the stored spec as ``verdict.labelled.uri`` (so the
  job
  rendered from that generation passes it to the trainer). The same file again is the same object: no new
  generation.
- ``show NAME``: the stored document and its generation; ``list``: every stored spec and its generation.

Exit status 1 with one line per problem (the file, the document path and the schema path) when anything fails.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from landfall.arrival import labelled_file as labelled_input
from landfall.arrival import labelled_recording
from landfall.arrival.config import ConverterConfig
from landfall.cli.common import job_config, reporting_errors
from landfall.core import logs
from landfall.core.artifacts import labelled as labelled_store
from landfall.core.artifacts import specs
from landfall.core.contracts.layout import Layout
from landfall.core.errors import AlreadyExists, BadInput, Invalid, NotFound
from landfall.core.services.storage import Storage, is_gs

SUFFIXES = (".yaml", ".yml", ".json")


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    v = sub.add_parser("validate", help="check spec files against landfall.dataset/v1 (no bucket needed)")
    v.add_argument("paths", nargs="+", metavar="PATH", help="spec files, or folders of them")
    a = sub.add_parser("apply", help="validate, then store each spec as a new generation (unchanged: kept)")
    a.add_argument("paths", nargs="+", metavar="PATH", help="spec files, or folders of them")
    a.add_argument("--if-generation", type=int, help="only over this generation (0: only if it has none); one file")
    s = sub.add_parser("show", help="a dataset's stored spec and its generation")
    s.add_argument("dataset")
    sub.add_parser("list", help="every stored spec and its generation")
    for q in (a, s, sub.choices["list"]):
        q.add_argument("--bucket", help="bucket (LANDFALL_BUCKET)")
        q.add_argument("--project", help="Google Cloud project (GOOGLE_CLOUD_PROJECT)")
        q.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    logs.setup()
    if args.action != "validate":
        from landfall.local.stack import use_running_stack

        use_running_stack(args=args)
    return reporting_errors(args, ACTIONS[args.action])


def files_of(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            raise Invalid(f"{raw}: no such file or folder")
    return found


def load_file(path: Path) -> dict:
    """The validated document of ``path``; ``Invalid`` naming the file and every problem."""
    if path.suffix not in SUFFIXES:
        raise Invalid(f"{path}: a spec is a {', '.join(SUFFIXES)} file")
    doc = specs.load_text(path.read_bytes(), str(path))
    if doc["name"] != path.stem:
        raise Invalid(f"{path}: names dataset {doc['name']!r}; the file of dataset {doc['name']!r} is "
                      f"{doc['name']}{path.suffix} (one file per dataset, named after it)")
    verdict = doc.get("verdict") or {}
    if "min_average_precision" in verdict and "labelled" not in verdict:
        raise Invalid(f"{path}: verdict.min_average_precision gates on a labelled set: name one with "
                      "verdict.labelled.file")
    if "uri" in (verdict.get("labelled") or {}):
        raise Invalid(f"{path}: verdict.labelled.uri is written by `landfall datasets apply` (the converted set), "
                      "not in a reviewed spec: name the file with verdict.labelled.file")
    return doc


def labelled_source(path: Path, doc: dict) -> tuple[str, str] | None:
    """``(source, label)`` of the spec's labelled file, or None. A relative ``file`` is relative to the spec file
    and must stay in its folder (the deploy build mounts only datasets/)."""
    entry = (doc.get("verdict") or {}).get("labelled")
    if not entry:
        return None
    file, label = str(entry["file"]), str(entry.get("label") or labelled_input.DEFAULT_LABEL)
    if is_gs(file):
        return file, label
    folder = path.parent.resolve()
    source = (folder / file).resolve()
    if folder not in source.parents:
        raise Invalid(f"{path}: verdict.labelled.file {file!r} is outside the spec's folder {path.parent}/ (the "
                      "deploy build sees only that folder): keep it beside the spec, or give a gs:// URI")
    return str(source), label


Read = labelled_input.Labelled | labelled_recording.Recording  # a spec's labelled set as read


def read_labelled(path: Path, doc: dict, storage: Storage) -> Read | None:
    """The spec's labelled set, read and checked for its shape; ``Invalid``, one line, naming the spec, the file
    and the reason. A series dataset's is a labelled recording (``landfall.arrival.labelled_recording``)."""
    found = labelled_source(path, doc)
    if found is None:
        return None
    source, label = found
    spec = specs.DatasetSpec.from_document(doc, None)
    cfg = ConverterConfig.load(**{k: v for k, v in spec.converter_fields().items() if k != "spec_generation"})
    file = doc["verdict"]["labelled"]["file"]
    try:
        if spec.series and labelled_recording.read_as_recording(source):
            return labelled_recording.load(storage, source, cfg, label)
        return labelled_input.load(storage, source, cfg, label)
    except BadInput as exc:
        what = (f"a recording of the series, time column {cfg.series_time_column!r}"
                if spec.series and labelled_recording.read_as_recording(source)
                else f"instances of shape ({cfg.timesteps}, {cfg.features})")
        raise Invalid(f"{path}: verdict.labelled.file {file}: {exc} (for {what}, label {label!r})") from None
    except NotFound:
        raise Invalid(f"{path}: verdict.labelled.file {file}: no such file ({source})") from None


def described(got: Read, uri: str = "") -> str:
    """What ``validate`` (and ``apply``, with the stored set's ``uri``) says of a labelled set it read."""
    at = f" {uri}" if uri else ""
    if isinstance(got, labelled_recording.Recording):
        return (f"labelled recording{at}: {len(got.labels)} rows, {got.positives} labelled anomalous, "
                f"{len(got.starts)} segment(s)")
    return f"labelled set{at}: {len(got.labels)} instances, {got.positives} positives"


def _labelled_sets(loaded: list[tuple[Path, dict]], storage: Storage,
                   local_only: bool = False) -> dict[str, Read]:
    """Every spec's labelled set (by dataset), all read before anything is written; ``Invalid`` listing each
    spec's problem. ``local_only``: a gs:// file is left for ``apply``."""
    found, problems = {}, []
    for path, doc in loaded:
        try:
            source = labelled_source(path, doc)
            if source is None or (local_only and is_gs(source[0])):
                continue
            found[doc["name"]] = read_labelled(path, doc, storage)
        except Invalid as exc:
            problems.append(str(exc))
    if problems:
        raise Invalid("\n".join(problems))
    return found  # type: ignore[return-value]


def load_all(paths: list[str]) -> list[tuple[Path, dict]]:
    """Every file's document, or ``Invalid`` listing every file's problems (nothing applied then)."""
    files = files_of(paths)
    if not files:
        raise Invalid(f"no spec files ({', '.join(SUFFIXES)}) in {' '.join(paths)}")
    loaded, problems = [], []
    for path in files:
        try:
            loaded.append((path, load_file(path)))
        except Invalid as exc:
            problems.append(str(exc))
    names = [doc["name"] for _, doc in loaded]
    problems += [f"dataset {n!r} has more than one file" for n in sorted(set(names)) if names.count(n) > 1]
    if problems:
        raise Invalid("\n".join(problems))
    return loaded


def validate(args: argparse.Namespace) -> int:
    loaded = load_all(args.paths)
    sets = _labelled_sets(loaded, Storage(), local_only=True)
    for path, doc in loaded:
        got = sets.get(doc["name"])
        more = f"; {described(got)}" if got else ""
        if got is None and labelled_source(path, doc):
            more = "; labelled set on Cloud Storage: checked by apply"
        print(f"{path}: valid {specs.API_VERSION} for dataset {doc['name']}{more}")
    return 0


def _with_labelled(storage: Storage, bucket: str, doc: dict, path: Path,
                   got: Read) -> tuple[dict[str, Any], str]:
    """``doc`` with ``verdict.labelled.uri``: the set stored (create-only, content-addressed) first."""
    _, label = labelled_source(path, doc)  # type: ignore[misc]
    source = doc["verdict"]["labelled"]["file"]
    if isinstance(got, labelled_recording.Recording):
        uri = labelled_store.write(storage, bucket, doc["name"], got.rows, got.labels, source=source, label=label,
                                   starts=got.starts)
    else:
        uri = labelled_store.write(storage, bucket, doc["name"], got.instances, got.labels, source=source,
                                   label=label)
    out = copy.deepcopy(doc)
    out["verdict"]["labelled"]["uri"] = uri
    return out, uri


def _target(args: argparse.Namespace) -> tuple[Storage, str, Layout]:
    cfg = job_config(args, "bucket", "project")
    if not cfg.bucket:
        raise Invalid("no bucket: pass --bucket (or LANDFALL_BUCKET)")
    return Storage(cfg.project), cfg.bucket, Layout.load()


def apply(args: argparse.Namespace) -> int:
    loaded = load_all(args.paths)
    if args.if_generation is not None and len(loaded) != 1:
        raise Invalid("--if-generation applies one file")
    storage, bucket, layout = _target(args)
    sets = _labelled_sets(loaded, storage)  # every labelled file read and checked before anything is written
    done = []
    for path, doc in loaded:
        entry: dict[str, Any] = {"dataset": doc["name"], "file": str(path)}
        got = sets.get(doc["name"])
        if got is not None:
            doc, uri = _with_labelled(storage, bucket, doc, path, got)
            entry["labelled"] = {"uri": uri, "instances": len(got.labels), "positives": got.positives}
        try:
            generation, changed = specs.apply(storage, bucket, doc, layout, if_generation=args.if_generation)
        except AlreadyExists as exc:  # another apply in between: nothing overwritten, look again
            raise Invalid(f"{path}: not applied: {exc}") from None
        done.append({**entry, "generation": generation, "changed": changed})
        if not args.json:
            more = f"; {described(got, entry['labelled']['uri'])}" if got is not None else ""
            print(f"{doc['name']}: {'applied as' if changed else 'unchanged at'} generation {generation} "
                  f"({specs.spec_uri(bucket, doc['name'], layout)}){more}")
    if args.json:
        print(json.dumps(done, indent=2))
    return 0


def show(args: argparse.Namespace) -> int:
    storage, bucket, layout = _target(args)
    spec = specs.for_dataset(storage, bucket, args.dataset, layout)
    if not spec.registered:
        print(f"landfall datasets: dataset {args.dataset} has no spec ({specs.spec_uri(bucket, args.dataset, layout)})"
              "; it runs with the deployment's LANDFALL_* settings", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"generation": spec.generation, "spec": spec.document()}, indent=2, sort_keys=True))
    else:
        print(f"# {specs.spec_uri(bucket, args.dataset, layout)} generation {spec.generation}")
        print(json.dumps(spec.document(), indent=2, sort_keys=True))
    return 0


def list_(args: argparse.Namespace) -> int:
    storage, bucket, layout = _target(args)
    found = specs.stored(storage, bucket, layout)
    if args.json:
        print(json.dumps([{"dataset": n, "generation": g} for n, g in found], indent=2))
        return 0
    if not found:
        print(f"no dataset specs under gs://{bucket}/{layout.specs_prefix}")
    for name, generation in found:
        print(f"{name:<40} generation {generation}")
    return 0


ACTIONS = {"validate": validate, "apply": apply, "show": show, "list": list_}
