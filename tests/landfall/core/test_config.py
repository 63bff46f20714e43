"""One source of defaults: the seed's model and batch, shared by the stages, the trainer and docs/trainer.md."""

from __future__ import annotations

from pathlib import Path

from landfall.arrival.config import ConverterConfig
from landfall.core.config import Seed
from landfall.submit.config import JobConfig
from trainer.config import TrainerConfig

TRAINER_DOC = Path(__file__).resolve().parents[3] / "docs" / "trainer.md"


def test_the_seed_defaults_are_the_articles():
    # The seed article: 36 timesteps x 10 features, GRU 128 -> 32, batch 1024 per worker.
    assert (Seed.TIMESTEPS, Seed.FEATURES, Seed.UNITS, Seed.BATCH_SIZE_PER_WORKER) == (36, 10, (128, 32), 1024)


def test_every_component_takes_the_seed_defaults():
    job, trainer, converter = JobConfig.load({}), TrainerConfig.load({}), ConverterConfig.load({})
    assert job.batch_size_per_worker == trainer.batch_size_per_worker == Seed.BATCH_SIZE_PER_WORKER
    assert job.epochs == trainer.epochs == Seed.EPOCHS
    assert converter.shape == trainer.shape == (Seed.TIMESTEPS, Seed.FEATURES)
    assert trainer.units == Seed.UNITS


def test_the_docs_state_the_same_defaults():
    text = TRAINER_DOC.read_text()
    assert f"`--batch-size-per-worker` ({Seed.BATCH_SIZE_PER_WORKER}, as in the seed" in text
    assert f"`--epochs` ({Seed.EPOCHS})" in text
