"""Dataset specs (landfall.core.artifacts.specs, ``landfall datasets``): the shipped schema, the reviewed datasets/
folder,
``apply`` against fake-gcs-server (conditional on the generation it read) and the loader's cache."""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from landfall.arrival.config import ConverterConfig, with_spec
from landfall.cli import main as cli
from landfall.core.artifacts import specs
from landfall.core.contracts.layout import Layout
from landfall.core.errors import AlreadyExists, BadInput, Invalid
from landfall.core.services.storage import Storage
from landfall.submit.config import JobConfig
from trainer.config import TrainerConfig
from trainer.task import parse_config

REPO = Path(__file__).resolve().parents[3]
DATASETS = REPO / "datasets"


def doc(name: str = "pump", **sections) -> dict:
    return {"apiVersion": specs.API_VERSION, "name": name, **sections}


# -- the reviewed folder ----------------------------------------------------------------------------------
def test_every_file_in_the_repository_datasets_folder_is_a_valid_spec(capsys):
    files = sorted(p for p in DATASETS.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    assert {p.stem for p in files} >= {"pump", "fleet"}
    assert cli(["datasets", "validate", str(DATASETS)]) == 0
    assert capsys.readouterr().out.count("valid landfall.dataset/v1") == len(files)
    shapes = {p.stem: specs.DatasetSpec.from_document(specs.load_text(p.read_bytes(), str(p)), 1).shape
              for p in files}
    assert dict(shapes["pump"]) == {"timesteps": 36, "features": 10}
    assert dict(shapes["fleet"]) == {"timesteps": 12, "features": 4}


def test_a_file_named_after_another_dataset_is_refused(tmp_path, capsys):
    (tmp_path / "turbine.yaml").write_text("apiVersion: landfall.dataset/v1\nname: pump\n")
    assert cli(["datasets", "validate", str(tmp_path)]) == 1
    assert "names dataset 'pump'" in capsys.readouterr().err


# -- the schema ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("section", "value", "path", "schema_path"), [
    ("resources", {"accelerator": "nvidia-k80"}, "resources.accelerator",
     "properties/resources/properties/accelerator/enum"),
    ("resources", {"engine": "argo-workflow"}, "resources.engine", "properties/resources/properties/engine/enum"),
    ("training", {"epochs": 0}, "training.epochs", "properties/training/properties/epochs/minimum"),
    ("shape", {"timesteps": "36"}, "shape.timesteps", "properties/shape/properties/timesteps/type"),
    ("model", {"units": []}, "model.units", "properties/model/properties/units/minItems"),
    ("verdict", {"threshold_quantile": 1.0}, "verdict.threshold_quantile",
     "properties/verdict/properties/threshold_quantile/exclusiveMaximum"),
    ("arrival", {"csv_header": "maybe"}, "arrival.csv_header", "properties/arrival/properties/csv_header/enum"),
    ("resources", {"gpus": 2}, "resources", "properties/resources/additionalProperties"),
])
def test_an_invalid_spec_names_the_document_and_schema_path(section, value, path, schema_path):
    with pytest.raises(Invalid) as info:
        specs.validate(doc(**{section: value}), "spec")
    assert f"{path} (schema: {schema_path})" in str(info.value)


def test_every_problem_is_listed_and_the_api_version_is_required():
    found = specs.problems({"name": "x y", "shape": {"features": 0}})
    assert any(line.startswith("(document) (schema: required)") for line in found)
    assert any(line.startswith("name (schema: properties/name/pattern)") for line in found)
    assert any(line.startswith("shape.features (schema: properties/shape/properties/features/minimum)")
               for line in found)


def test_an_accelerator_priced_by_the_deployment_is_accepted(monkeypatch):
    with pytest.raises(Invalid):
        specs.validate(doc(resources={"accelerator": "tpu-v9"}), "spec")
    monkeypatch.setenv("LANDFALL_GPU_PRICES", json.dumps({"tpu-v9": 4.0}))
    assert specs.validate(doc(resources={"accelerator": "tpu-v9"}), "spec")["resources"]["accelerator"] == "tpu-v9"


def test_yaml_numbers_are_read_as_json_reads_them():
    parsed = specs.load_text("apiVersion: landfall.dataset/v1\nname: p\ntraining: {learning_rate: 1e-3}\n", "y")
    assert parsed["training"]["learning_rate"] == pytest.approx(0.001)
    # booleans too, as YAML 1.2 reads them: `action: off` is a check's action, not YAML 1.1's false
    arrival = specs.load_text("apiVersion: landfall.dataset/v1\nname: p\narrival: {drop_nonfinite: true, checks: "
                             "{drift: {action: off}, flat_channel: {action: warn}}}\n", "y")["arrival"]
    assert arrival == {"drop_nonfinite": True,
                       "checks": {"drift": {"action": "off"}, "flat_channel": {"action": "warn"}}}
    with pytest.raises(Invalid, match="drop_nonfinite"):
        specs.load_text("apiVersion: landfall.dataset/v1\nname: p\narrival: {drop_nonfinite: yes}\n", "y")
    with pytest.raises(Invalid, match="neither YAML nor JSON"):
        specs.parse("name: [unclosed", "y")
    with pytest.raises(Invalid, match="more than a spec may have"):
        specs.parse("a: " + "x" * specs.MAX_BYTES, "y")


# -- what the stages take from a spec -------------------------------------------------------------------
FLEET = doc("fleet", shape={"timesteps": 12, "features": 4}, model={"units": [8, 4], "dropout": 0.1},
            training={"epochs": 3, "batch_size_per_worker": 32, "learning_rate": 0.002, "validation_fraction": 0.2,
                      "warm_start": "none", "exclude_flagged": True,
                      "early_stopping": {"patience": 7, "min_delta": 0.01, "start_from_epoch": 2, "reductions": 1,
                                         "factor": 0.5, "smoothing": 3, "min_gain": 0.05}},
            resources={"engine": "jobset", "workers": 3, "gpus_per_worker": 2, "accelerator": "nvidia-tesla-t4",
                       "queue_name": "fleet-q", "cpu": "2", "memory": "8Gi"},
            arrival={"csv_header": "present", "drop_nonfinite": True, "on_delete": "keep"},
            verdict={"promote_tolerance": 0.05, "threshold_quantile": 0.95}, retrain={"quiet_s": 10})


def test_a_spec_sets_each_stage_and_what_it_leaves_unset_is_the_environment():
    spec = specs.DatasetSpec.from_document(specs.validate(FLEET, "fleet"), 7)
    env = {"LANDFALL_SHARD_TARGET_BYTES": "1000", "LANDFALL_TRAINER_ARGS": "--seed,3", "LANDFALL_BACKOFF_LIMIT": "5"}
    conv = dataclasses.replace(ConverterConfig.load(env), **spec.converter_fields())
    assert (conv.shape, conv.csv_header, conv.drop_nonfinite, conv.on_delete, conv.spec_generation) == (
        (12, 4), "present", True, "keep", 7)
    assert conv.shard_target_bytes == 1000
    base = JobConfig.load(env)
    job = dataclasses.replace(base, **spec.job_fields(base.trainer_args))
    assert (job.engine, job.workers, job.gpus_per_worker, job.accelerator, job.queue_name, job.cpu_request,
            job.memory_request, job.epochs, job.batch_size_per_worker, job.backoff_limit) == (
        "jobset", 3, 2, "nvidia-tesla-t4", "fleet-q", "2", "8Gi", 3, 32, 5)
    trainer = parse_config(["--inputs", "gs://b/runs/j/inputs.json", "--job-dir", "gs://b/runs/j",
                            *job.trainer_args], env={})
    assert (trainer.shape, trainer.units, trainer.dropout, trainer.learning_rate, trainer.validation_fraction,
            trainer.warm_start, trainer.promote_tolerance, trainer.threshold_quantile, trainer.seed,
            trainer.spec_generation) == ((12, 4), (8, 4), 0.1, 0.002, 0.2, "none", 0.05, 0.95, 3, 7)
    assert trainer.exclude_flagged and not TrainerConfig().exclude_flagged  # training.exclude_flagged: off by default
    rule = trainer.stopping_rule()  # training.early_stopping, every field, as the trainer's rule
    assert (rule.patience, rule.min_delta, rule.start_from_epoch, rule.reductions, rule.factor, rule.smoothing,
            rule.min_gain) == (7, 0.01, 2, 1, 0.5, 3, 0.05)
    assert dict(spec.retrain) == {"quiet_s": 10}


def test_no_spec_changes_nothing():
    spec = specs.DatasetSpec("pump")
    assert spec.generation is None and not spec.registered and dict(spec.retrain) == {}
    base = JobConfig.load({})
    assert dataclasses.replace(base, **spec.job_fields(base.trainer_args)) == base
    assert dataclasses.replace(ConverterConfig.load({}), **spec.converter_fields()) == ConverterConfig.load({})
    defaults = TrainerConfig()
    assert parse_config(["--manifest", "m", "--job-dir", "d"], env={}).shape == defaults.shape


# -- in the bucket ---------------------------------------------------------------------------------------
class Counting(Storage):
    """The real client, counting what the loader asks of it."""

    def __init__(self, project: str):
        super().__init__(project)
        self.stats = self.bodies = 0

    def stat(self, uri, generation=None):
        self.stats += 1
        return super().stat(uri, generation)

    def read_bytes(self, uri, generation=None):
        self.bodies += 1
        return super().read_bytes(uri, generation)


def test_apply_writes_a_generation_only_when_the_spec_changed(emulator_stack, bucket):
    storage = emulator_stack.storage
    g1, changed = specs.apply(storage, bucket, doc(shape={"timesteps": 36, "features": 10}))
    assert changed and g1 > 0
    assert specs.apply(storage, bucket, doc(shape={"features": 10, "timesteps": 36})) == (g1, False)
    g2, changed = specs.apply(storage, bucket, doc(shape={"timesteps": 12, "features": 10}))
    assert changed and g2 != g1
    assert specs.stored(storage, bucket) == [("pump", g2)]
    stored = json.loads(storage.read_bytes(specs.spec_uri(bucket, "pump", Layout())))
    assert stored["shape"] == {"features": 10, "timesteps": 12}  # canonical JSON, whatever was applied


def test_two_concurrent_applies_never_overwrite_each_other_silently(emulator_stack, bucket):
    storage = emulator_stack.storage
    g0, _ = specs.apply(storage, bucket, doc(training={"epochs": 1}))
    variants = [doc(training={"epochs": e}) for e in range(2, 10)]

    def one(d):
        try:
            return specs.apply(storage, bucket, d, if_generation=g0)
        except AlreadyExists:
            return None

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, variants))
    won = [(d, r) for d, r in zip(variants, results, strict=True) if r is not None]
    assert len(won) == 1  # of any number over one generation, exactly one is written
    spec = specs.for_dataset(storage, bucket, "pump")
    assert spec.generation == won[0][1][0] and dict(spec.training) == won[0][0]["training"]


def test_an_invalid_spec_is_refused_by_apply_and_nothing_is_written(emulator_stack, bucket, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setenv("LANDFALL_BUCKET", bucket)
    good, bad = tmp_path / "pump.yaml", tmp_path / "turbine.json"
    good.write_text("apiVersion: landfall.dataset/v1\nname: pump\nshape: {timesteps: 36, features: 10}\n")
    bad.write_text(json.dumps(doc("turbine", resources={"accelerator": "nvidia-k80", "engine": "tfjob"})))
    assert cli(["datasets", "apply", str(tmp_path), "--bucket", bucket]) == 1
    err = capsys.readouterr().err
    assert "turbine.json" in err
    assert "resources.accelerator (schema: properties/resources/properties/accelerator/enum)" in err
    assert specs.stored(emulator_stack.storage, bucket) == []  # the valid one is not applied either
    bad.write_text(json.dumps(doc("turbine", resources={"engine": "kubeflow-mpijob"})))
    assert cli(["datasets", "apply", str(bad), "--bucket", bucket]) == 1
    assert "resources.engine (schema: properties/resources/properties/engine/enum)" in capsys.readouterr().err
    bad.unlink()
    assert cli(["datasets", "apply", str(tmp_path), "--bucket", bucket]) == 0
    assert "pump: applied as generation" in capsys.readouterr().out
    assert cli(["datasets", "apply", str(good), "--bucket", bucket, "--if-generation", "0"]) == 1
    assert "not applied" in capsys.readouterr().err
    assert cli(["datasets", "show", "pump", "--bucket", bucket, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["spec"]["shape"] == {"timesteps": 36, "features": 10} and shown["generation"] > 0
    assert cli(["datasets", "list", "--bucket", bucket]) == 0
    assert "pump" in capsys.readouterr().out
    assert cli(["datasets", "show", "turbine", "--bucket", bucket]) == 1


def test_the_loader_reads_metadata_per_use_and_the_body_once_per_generation(emulator_stack, bucket):
    storage = Counting(emulator_stack.project)
    assert specs.for_dataset(storage, bucket, "pump").generation is None  # no spec: the environment's settings
    g1, _ = specs.apply(emulator_stack.storage, bucket, doc(model={"units": [4]}))
    storage.stats = storage.bodies = 0
    for _ in range(5):
        assert specs.for_dataset(storage, bucket, "pump").generation == g1
    assert (storage.stats, storage.bodies) == (5, 1)
    g2, _ = specs.apply(emulator_stack.storage, bucket, doc(model={"units": [8]}))
    spec = specs.for_dataset(storage, bucket, "pump")
    assert (spec.generation, list(spec.model["units"]), storage.bodies) == (g2, [8], 2)
    old = specs.at_generation(storage, bucket, "pump", g1)  # a job released under g1: from the cache
    assert (old.generation, list(old.model["units"]), storage.bodies) == (g1, [4], 2)


def test_a_stored_spec_written_around_apply_is_refused_by_the_converter(emulator_stack, bucket):
    storage = emulator_stack.storage
    uri = specs.spec_uri(bucket, "pump", Layout())
    storage.write_bytes(uri, json.dumps(doc("other")).encode())
    with pytest.raises(BadInput) as info:
        with_spec(ConverterConfig.load({}), storage, bucket, "pump")
    assert info.value.reason == "invalid_spec" and "names dataset 'other'" in info.value.detail
    storage.write_bytes(uri, b"{ not json")
    with pytest.raises(BadInput, match="invalid_spec"):
        with_spec(ConverterConfig.load({}), storage, bucket, "pump")


def test_registered_refuses_a_dataset_without_a_spec(emulator_stack, bucket):
    storage = emulator_stack.storage
    registered = ConverterConfig.load({"LANDFALL_DATASETS": "registered"})
    with pytest.raises(BadInput) as info:
        with_spec(registered, storage, bucket, "fleet")
    assert info.value.reason == "unknown_dataset"
    assert with_spec(ConverterConfig.load({}), storage, bucket, "fleet") == ConverterConfig.load({})  # open
    specs.apply(storage, bucket, doc("fleet", shape={"timesteps": 12, "features": 4}))
    assert with_spec(registered, storage, bucket, "fleet").shape == (12, 4)
    with pytest.raises(ValueError, match="datasets must be one of"):
        ConverterConfig.load({"LANDFALL_DATASETS": "closed"})


def test_documents_written_before_specs_read_as_having_none():
    from landfall.core.artifacts.results import Result
    from landfall.core.contracts.messages import JobInputs, Manifest

    old_inputs = {"schema": "landfall.inputs/v1", "dataset": "pump", "job": "j", "seq": 1, "manifests": [],
                  "requests": []}
    assert JobInputs.from_json(json.dumps(old_inputs)).spec_generation is None
    old_result = {"schema": "landfall.result/v1", "dataset": "pump", "job": "j", "status": "succeeded",
                  "verdict": "promoted"}
    assert Result.from_json(json.dumps(old_result)).spec_generation is None
    old_manifest = {"schema": "landfall.manifest/v1", "dataset": "pump", "arrival_id": "a",
                    "source": {"bucket": "b", "name": "incoming/pump/x", "generation": 1, "size": 1},
                    "shape": [36, 10], "count": 1, "shards": [{"uri": "gs://b/s", "count": 1, "bytes": 1,
                                                              "crc32c": "AAAAAA=="}],
                    "stats": {"mean": [0.0] * 10, "std": [1.0] * 10, "min": [0.0] * 10, "max": [1.0] * 10}}
    assert Manifest.from_json(json.dumps(old_manifest)).spec_generation is None
