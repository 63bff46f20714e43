"""Dataset specs (``landfall.dataset/v1``): one document per dataset, its shape, model, training, resources,
arrival, verdict and retrain rules; what a document leaves unset is the deployment's ``LANDFALL_*`` setting.

The document (YAML or JSON) is validated by the JSON Schema shipped beside this module
(``dataset-v1.schema.json``, draft 2020-12, with the ``jsonschema`` library); the accelerator and engine
enums are filled in from ``landfall.core.rules.accelerators`` (the names it can price, ``LANDFALL_GPU_PRICES``
included) and ``landfall.core.config.ENGINES``, so there is one list of each. Every error names the
document path and the schema path (``resources.accelerator (schema: properties/resources/properties/
accelerator/enum): 'nvidia-k80' is not one of [...]``).

Where they live: ``gs://BUCKET/config/datasets/<dataset>.json`` (``Layout.specs_prefix``), always stored as
canonical JSON whatever was applied. ``apply`` writes a new generation only when the content changed, and
only over the generation it read (``ifGenerationMatch``), so of two concurrent applies one wins and the
other is told to look again; re-applying the same file (every deploy does) is a no-op.

How stages read them (``for_dataset``): one metadata read (the object's generation) per use, the body only
when the generation changed since this process last read it; a dataset without a spec gets
``DatasetSpec(generation=None)`` and empty sections: today's settings. What a stage takes from a spec is
decided at the moment it acts (a conversion, a release), and the generation is recorded with what it wrote
(the manifest, ``inputs.json``), so a job released under generation 3 keeps generation 3's settings
whatever is applied while it runs.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from importlib import resources
from types import MappingProxyType
from typing import Any

import yaml

from landfall.core.config import ENGINES
from landfall.core.contracts.layout import Layout, gs, valid_dataset
from landfall.core.errors import AlreadyExists, Invalid, NotFound, TemporaryError
from landfall.core.rules import accelerators
from landfall.core.rules.series_windows import MEAN
from landfall.core.services.storage import Storage

API_VERSION = "landfall.dataset/v1"
# A series dataset's model when its spec names no model.kind: the dense autoencoder without dropout. Decided on the
# NAB and aeon recordings of `landfall bench detect` (docs/benchmarks.md, issue #47): the seed's GRU at its shape
# learned nothing there (its VUS-PR 0.02 and 0.14 on kdd135 and ecg3 against the dense model's 0.90 and 0.81, the
# dense model as good or within 0.01 on the other seven); without dropout it did no better (0.02, 0.12), nor at a
# learning rate of 3e-3 (ecg3: 0.12), and it trained 4-10x slower. Instance datasets (the seed's shape) keep the
# seed's GRU.
SERIES_MODEL = {"kind": "dense", "dropout": 0}
AUTO = "auto"  # shape.window.length: one period of the first arrival (landfall.arrival.autowindow)
SECTIONS = ("shape", "model", "training", "resources", "arrival", "verdict", "retrain")
MAX_BYTES = 64 * 1024  # a spec is a page of settings; anything larger is refused before it is parsed
READ_ATTEMPTS = 4  # a spec replaced between its metadata read and its body read is read again, this often
UNKNOWN_DATASET = "unknown_dataset"  # the rejection reason under LANDFALL_DATASETS=registered

# The converter's settings (landfall.arrival.config.ConverterConfig) a spec sets: (section, key) -> field.
CONVERTER_FIELDS = {
    ("shape", "timesteps"): "timesteps", ("shape", "features"): "features",
    ("arrival", "csv_header"): "csv_header", ("arrival", "drop_nonfinite"): "drop_nonfinite",
    ("arrival", "on_delete"): "on_delete", ("arrival", "checks"): "checks",
    # A series dataset (landfall.arrival.series): window.length is the instance's timesteps.
    ("shape", "window.length"): "timesteps", ("shape", "window.stride"): "window_stride",
    ("arrival", "series.time_column"): "series_time_column", ("arrival", "series.channels"): "series_channels",
    ("arrival", "series.drop_columns"): "series_drop_columns", ("arrival", "series.max_gap"): "series_max_gap",
    ("arrival", "series.duplicate_times"): "series_duplicate_times",
}
# The submit stage's (landfall.submit.config.JobConfig): the job's resources and the flags it renders itself.
JOB_FIELDS = {
    ("resources", "engine"): "engine", ("resources", "workers"): "workers",
    ("resources", "gpus_per_worker"): "gpus_per_worker", ("resources", "accelerator"): "accelerator",
    ("resources", "queue_name"): "queue_name", ("resources", "cpu"): "cpu_request",
    ("resources", "memory"): "memory_request", ("training", "epochs"): "epochs",
    ("training", "batch_size_per_worker"): "batch_size_per_worker",
}
# The trainer's (trainer.config.TrainerConfig), passed as its flags by the job the submit stage renders.
TRAINER_FLAGS = {
    ("shape", "timesteps"): "--timesteps", ("shape", "features"): "--features",
    ("model", "units"): "--units", ("model", "dropout"): "--dropout", ("model", "kind"): "--model-kind",
    ("training", "learning_rate"): "--learning-rate", ("training", "min_steps_per_epoch"): "--min-steps-per-epoch",
    ("training", "validation_fraction"): "--validation-fraction",
    ("training", "holdout"): "--holdout",
    ("training", "warm_start"): "--warm-start",
    ("verdict", "promote_tolerance"): "--promote-tolerance", ("verdict", "select"): "--select",
    ("verdict", "promote_margin"): "--promote-margin", ("verdict", "model_margin"): "--model-margin",
    ("verdict", "threshold_quantile"): "--threshold-quantile",
    ("verdict", "min_average_precision"): "--min-average-precision",
    ("verdict", "min_skill"): "--min-skill",
    # trainer.judging.baselines: {"pca": 0, "nearest_neighbour": null}
    ("verdict", "min_skill_over"): "--min-skill-over",
    ("verdict", "min_average_precision_over_baselines"): "--min-average-precision-over-baselines",
    # A dotted key is a field of a nested object: training.early_stopping.patience (trainer.training.stopping).
    ("training", "early_stopping.patience"): "--early-stopping-patience",
    ("training", "early_stopping.min_delta"): "--early-stopping-min-delta",
    ("training", "early_stopping.min_gain"): "--early-stopping-min-gain",
    ("training", "early_stopping.start_from_epoch"): "--early-stopping-start-from-epoch",
    ("training", "early_stopping.reductions"): "--early-stopping-reductions",
    ("training", "early_stopping.factor"): "--early-stopping-factor",
    ("training", "early_stopping.smoothing"): "--early-stopping-smoothing",
    ("training", "deterministic"): "--deterministic",
    ("training", "exclude_flagged"): "--exclude-flagged",  # trainer.judging.champion_view
    ("shape", "window.length"): "--timesteps",  # a series dataset's windows are its instances
    ("shape", "window.combine"): "--combine",  # how its rows are scored: the verdict chooses for that (issue #55)
}

def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One dataset's spec as a stage uses it. ``generation`` None: the dataset has none (today's settings)."""

    name: str
    generation: int | None = None
    shape: Mapping[str, Any] = dataclasses.field(default_factory=_empty)
    model: Mapping[str, Any] = dataclasses.field(default_factory=_empty)
    training: Mapping[str, Any] = dataclasses.field(default_factory=_empty)
    resources: Mapping[str, Any] = dataclasses.field(default_factory=_empty)
    arrival: Mapping[str, Any] = dataclasses.field(default_factory=_empty)
    verdict: Mapping[str, Any] = dataclasses.field(default_factory=_empty)
    # Only the keys the document set (landfall.submit.policy puts them over the deployment's defaults).
    retrain: Mapping[str, float | int] = dataclasses.field(default_factory=_empty)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], generation: int | None) -> DatasetSpec:
        """From a document ``validate`` accepted."""
        return cls(name=str(doc["name"]), generation=generation,
                   **{s: MappingProxyType(copy.deepcopy(dict(doc.get(s) or {}))) for s in SECTIONS})

    @property
    def registered(self) -> bool:
        return self.generation is not None

    def _set(self, table: Mapping[tuple[str, str], str]) -> Iterable[tuple[str, Any]]:
        for (section, key), target in table.items():
            values: Any = getattr(self, section)
            *outer, last = key.split(".")
            for name in outer:
                values = values.get(name) if isinstance(values, Mapping) else None
            if isinstance(values, Mapping) and last in values:
                yield target, values[last]

    def converter_fields(self) -> dict[str, Any]:
        """``dataclasses.replace(ConverterConfig, **this)``: the spec's shape and arrival rules, and its generation."""
        fields = dict(self._set(CONVERTER_FIELDS))
        if fields.get("timesteps") == AUTO:  # estimated from the first arrival (landfall.arrival.autowindow)
            del fields["timesteps"]
            fields["window_auto"] = True
        for key in ("series_channels", "series_drop_columns"):
            if key in fields:
                fields[key] = tuple(fields[key])
        # A hashable setting: its canonical JSON (landfall.core.quality.checks.Rules.parse reads it).
        if "checks" in fields:
            fields["checks"] = json.dumps(fields["checks"], sort_keys=True, separators=(",", ":"))
        if "series_channels" in fields and "features" not in fields:
            fields["features"] = len(fields["series_channels"])  # the channels listed are the features
        return {**fields, "spec_generation": self.generation}

    @property
    def series(self) -> bool:
        """A series dataset (``shape.window`` with ``arrival.series``): windows cut from stored series."""
        return "window" in self.shape

    @property
    def combine(self) -> str:
        """A series dataset's row score from the windows over it (``shape.window.combine``; default ``mean``:
        ``landfall.detect.located``), wherever it is scored."""
        return str((self.shape.get("window") or {}).get("combine") or MEAN)

    def job_fields(self, trainer_args: tuple[str, ...] = ()) -> dict[str, Any]:
        """``dataclasses.replace(JobConfig, **this)``: the job's resources, epochs and batch size, and the trainer
        flags for the rest, after the deployment's ``trainer_args`` (argparse: the last wins, so the spec's)."""
        return {**dict(self._set(JOB_FIELDS)), "trainer_args": tuple(trainer_args) + self.trainer_args()}

    def trainer_args(self) -> tuple[str, ...]:
        args: list[str] = []
        for flag, value in self._set(TRAINER_FLAGS):
            if value == AUTO:  # a window not estimated yet: the job's --timesteps come from its manifests
                continue
            if isinstance(value, bool):  # a BooleanOptionalAction flag: --x or --no-x
                args.append(flag if value else "--no-" + flag[2:])
                continue
            if isinstance(value, Mapping):  # NAME=VALUE pairs; a null value leaves that name out ("none": none)
                pairs = [f"{k}={v:g}" for k, v in sorted(value.items()) if v is not None]
                args += [flag, ",".join(pairs) or "none"]
                continue
            args += [flag, ",".join(str(u) for u in value) if isinstance(value, list | tuple) else str(value)]
        # the channel count, the honest hold-out (landfall.core.rules.series_windows) and the model, unless set
        if self.series:
            channels = (self.arrival.get("series") or {}).get("channels")
            if channels and "features" not in self.shape:
                args += ["--features", str(len(channels))]
            if "holdout" not in self.training:
                args += ["--holdout", "segment"]
            if "kind" not in self.model:  # SERIES_MODEL: the model that detects on real recordings (issue #47)
                args += ["--model-kind", SERIES_MODEL["kind"]]
                if "dropout" not in self.model:
                    args += ["--dropout", str(SERIES_MODEL["dropout"])]
        labelled = self.verdict.get("labelled") or {}
        if labelled.get("uri"):  # the set `landfall datasets apply` converted (landfall.core.artifacts.labelled)
            args += ["--labelled", str(labelled["uri"])]
        if self.generation is not None:
            args += ["--spec-generation", str(self.generation)]
        return tuple(args)

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"apiVersion": API_VERSION, "name": self.name}
        doc.update({s: copy.deepcopy(dict(getattr(self, s))) for s in SECTIONS if getattr(self, s)})
        return doc


# -- the document ----------------------------------------------------------------------------------------
@functools.cache
def _base_schema() -> dict[str, Any]:
    text = resources.files("landfall.core.artifacts").joinpath("dataset-v1.schema.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


@functools.cache
def _validator(names: tuple[str, ...]) -> Any:
    import jsonschema

    schema = copy.deepcopy(_base_schema())
    res = schema["properties"]["resources"]["properties"]
    res["accelerator"]["enum"] = list(names)
    res["engine"]["enum"] = list(ENGINES)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema() -> dict[str, Any]:
    """The schema in force (the shipped one, with the accelerators this deployment can price)."""
    return dict(_validator(tuple(sorted(accelerators.prices()))).schema)


class _Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where ``1e-3`` is a string and ``off`` a boolean; a spec's numbers and booleans are
    read as YAML 1.2 (and JSON) read them, so ``learning_rate: 1e-3`` is the number a user means and a check's
    ``action: off`` the action (only ``true`` and ``false`` are booleans)."""


_BOOL = "tag:yaml.org,2002:bool"
_Loader.yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL]
                                   for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))

_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"),
    list("-+0123456789."))


def parse(text: str | bytes, where: str) -> dict[str, Any]:
    """A YAML or JSON document (JSON is YAML): ``Invalid`` naming ``where`` when it is neither, or too large."""
    if len(text) > MAX_BYTES:
        raise Invalid(f"{where}: {len(text)} bytes, more than a spec may have ({MAX_BYTES})")
    try:
        doc = yaml.load(text, Loader=_Loader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise Invalid(f"{where}: neither YAML nor JSON: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(doc, dict):
        raise Invalid(f"{where}: a spec is a mapping (apiVersion, name, sections), not {type(doc).__name__}")
    return doc


def problems(doc: Any) -> list[str]:
    """Every way ``doc`` breaks the schema, one line each: ``<document path> (schema: <schema path>): message``."""
    validator = _validator(tuple(sorted(accelerators.prices())))
    lines = _series_problems(doc) if isinstance(doc, Mapping) else []
    for err in sorted(validator.iter_errors(doc), key=lambda e: (list(map(str, e.path)), list(e.schema_path))):
        at = ".".join(str(p) for p in err.path) or "(document)"
        message = err.message if len(err.message) <= 300 else err.message[:297] + "..."
        lines.append(f"{at} (schema: {'/'.join(str(p) for p in err.schema_path)}): {message}")
    return lines


def _series_problems(doc: Mapping[str, Any]) -> list[str]:
    """What a series dataset's spec must agree on beyond the schema (one line each, as ``problems``)."""
    shape = doc.get("shape") if isinstance(doc.get("shape"), Mapping) else {}
    arrival = doc.get("arrival") if isinstance(doc.get("arrival"), Mapping) else {}
    training = doc.get("training") if isinstance(doc.get("training"), Mapping) else {}
    series = arrival.get("series")
    window = "window" in shape
    out = []
    if window != (series is not None):
        out.append("shape.window (series): shape.window and arrival.series go together: a series dataset "
                   "needs both (its windows, and how to read its series)")
    if not window:
        return out
    if "timesteps" in shape:
        out.append("shape.timesteps (series): a series dataset's timesteps are its window.length; set only that")
    if training.get("holdout") == "random":
        out.append("training.holdout (series): overlapping windows need the blocks hold-out (random would put "
                   "windows sharing rows on both sides of the split)")
    channels = series.get("channels") if isinstance(series, Mapping) else None
    if isinstance(channels, list) and "features" in shape and shape["features"] != len(channels):
        out.append(f"shape.features (series): {shape['features']}, but arrival.series.channels lists "
                   f"{len(channels)} channels")
    if not channels and "features" not in shape:
        out.append("shape.features (series): the channel count is needed (the model's features): set "
                   "shape.features or list arrival.series.channels")
    return out


def validate(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` if it is a valid ``landfall.dataset/v1`` document, else ``Invalid`` listing every problem."""
    found = problems(doc)
    if found:
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        raise Invalid(f"{where}: not a valid {API_VERSION}: " + "; ".join(found[:3]) + more)
    return dict(doc)


def load_text(text: str | bytes, where: str) -> dict[str, Any]:
    return validate(parse(text, where), where)


def canonical(doc: Mapping[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


# -- in the bucket -----------------------------------------------------------------------------------------
def spec_uri(bucket: str, dataset: str, layout: Layout) -> str:
    if not valid_dataset(dataset):
        raise Invalid(f"dataset {dataset!r} is not a dataset name")
    return gs(bucket, f"{layout.specs_prefix}{dataset}.json")


_CACHE: dict[tuple[str, str], DatasetSpec] = {}  # (uri, generation) -> the spec, newest few per dataset
_LOCK = threading.Lock()
_KEEP = 4  # generations kept per dataset: a release under generation N may re-render after N+1 was applied


def _read(storage: Storage, uri: str, dataset: str, generation: int) -> DatasetSpec:
    key = (uri, str(generation))
    spec = _CACHE.get(key)
    if spec is not None:
        return spec
    body = storage.read_bytes(uri, generation)
    doc = load_text(body, f"{uri}#{generation}")
    if doc["name"] != dataset:
        raise Invalid(f"{uri}#{generation}: names dataset {doc['name']!r}, not {dataset!r}")
    spec = DatasetSpec.from_document(doc, generation)
    with _LOCK:
        _CACHE[key] = spec
        mine = sorted((int(g) for u, g in _CACHE if u == uri), reverse=True)
        for old in mine[_KEEP:]:
            _CACHE.pop((uri, str(old)), None)
    return spec


def for_dataset(storage: Storage, bucket: str, dataset: str, layout: Layout | None = None) -> DatasetSpec:
    """The dataset's spec now: one metadata read, the body only when its generation is new to this process.

    No spec: ``DatasetSpec(dataset)`` (generation None, empty sections). A stored spec that is not valid (written
    around ``apply``) is ``Invalid``: permanent, the stage rejects what it was doing and says why."""
    uri = spec_uri(bucket, dataset, layout or Layout())
    for _ in range(READ_ATTEMPTS):
        try:
            generation = storage.stat(uri).generation
        except NotFound:
            return DatasetSpec(dataset)
        try:
            return _read(storage, uri, dataset, generation)
        except NotFound:  # replaced (or deleted) between the two reads: look again
            continue
    raise TemporaryError(f"{uri} kept changing while it was read ({READ_ATTEMPTS} attempts)")


def at_generation(storage: Storage, bucket: str, dataset: str, generation: int | None,
                  layout: Layout | None = None) -> DatasetSpec:
    """The spec of ``generation`` (what a job was released with), from the cache or the bucket; when that
    generation is gone (replaced, and the bucket keeps no versions) the current one, which the caller logs."""
    if generation is None:
        return DatasetSpec(dataset)
    uri = spec_uri(bucket, dataset, layout or Layout())
    try:
        return _read(storage, uri, dataset, generation)
    except NotFound:
        return for_dataset(storage, bucket, dataset, layout)


def apply(storage: Storage, bucket: str, doc: Mapping[str, Any], layout: Layout | None = None,
          if_generation: int | None = None) -> tuple[int, bool]:
    """Validates ``doc`` and stores it as a new generation of its dataset's spec: ``(generation, changed)``.

    Conditional on the generation read here (or ``if_generation``, what the caller showed its user): a
    concurrent apply in between is ``AlreadyExists`` (look again), never silently overwritten. The same
    content again is no new generation (``changed`` False).

    A ``window.length: auto`` over a stored spec whose window was estimated (``estimated_from``) keeps the estimate:
    the deploy build applies the reviewed ``auto`` again at every deploy, and the dataset's windows, jobs and
    champion stay cut at the length its first arrival gave. A number applied replaces it."""
    doc = validate(doc, f"spec {doc.get('name')!r}" if isinstance(doc, Mapping) else "spec")
    uri = spec_uri(bucket, doc["name"], layout or Layout())
    try:
        current, generation = storage.read_generation(uri)
    except NotFound:
        current, generation = None, 0
    if if_generation is not None and if_generation != generation:
        raise AlreadyExists(f"{uri} is at generation {generation}, not {if_generation}: it changed since it was "
                            "read (look again: `landfall datasets show`)")
    doc = keep_estimate(doc, current)
    body = canonical(doc)
    if current == body:
        return generation, False
    return storage.write_if_generation(uri, body, generation), True


def keep_estimate(doc: dict[str, Any], current: bytes | None) -> dict[str, Any]:
    """``doc`` with the stored spec's estimated window (``length`` and ``estimated_from``) where ``doc`` says
    ``auto`` (``apply``); ``doc`` itself otherwise."""
    window = (doc.get("shape") or {}).get("window") or {}
    if window.get("length") != AUTO or current is None:
        return doc
    try:
        stored_window = (json.loads(current).get("shape") or {}).get("window") or {}
    except (ValueError, AttributeError):
        return doc
    if not isinstance(stored_window.get("length"), int) or "estimated_from" not in stored_window:
        return doc
    out = copy.deepcopy(doc)
    out["shape"]["window"].update(length=stored_window["length"], estimated_from=stored_window["estimated_from"])
    return out


def stored(storage: Storage, bucket: str, layout: Layout | None = None) -> list[tuple[str, int]]:
    """Every stored spec: ``(dataset, generation)``, by name."""
    layout = layout or Layout()
    found = []
    for info in storage.list_objects(gs(bucket, layout.specs_prefix), suffix=".json"):
        name = info.uri.rsplit("/", 1)[-1][: -len(".json")]
        if valid_dataset(name):
            found.append((name, info.generation))
    return sorted(found)
