"""The local controller of an engine: ``make_operator`` (``landfall operator``, ``landfall scaling``, the tests).

``landfall.local.tfjob_controller.Operator`` runs TFJobs as the training operator does,
``landfall.local.jobset_controller.JobSetOperator`` (a subclass) JobSets as the JobSet controller does; this module
picks one, so the two import no picker of each other.
"""

from __future__ import annotations

import os

from landfall.core.config import ENGINE_BACKENDS
from landfall.core.services.storage import Storage
from landfall.local.jobset_controller import JobSetOperator
from landfall.local.tfjob_controller import Operator
from landfall.local.vertex_controller import VertexController
from landfall.submit import engine
from landfall.submit.config import JobConfig

# The controller that plays each engine on this machine, by engine (every name of landfall.core.config.ENGINES).
OPERATORS: dict[str, type[Operator]] = {"tfjob": Operator, "jobset": JobSetOperator, "vertex": VertexController}


def make_operator(state_dir: str | os.PathLike[str], namespace: str = "landfall-training",
                  config: JobConfig | None = None, storage: Storage | None = None, poll_s: float = 0.5,
                  env: dict[str, str] | None = None, engine_name: str | None = None) -> Operator:
    """The controller of ``engine_name`` (default: the config's, else ``tfjob``): ``OPERATORS``' (``Operator`` for
    TFJobs, ``landfall.local.jobset_controller.JobSetOperator`` for JobSets); ``ValueError`` naming the engines for
    another."""
    name = engine_name or (config.engine if config is not None else "tfjob")
    engine.module(name)
    return OPERATORS[name](state_dir, namespace, config, storage, poll_s, env)


def backend_for(engine_name: str) -> str:
    """The backend an engine's jobs live in on this machine: the state folder where it can
    (``core.config.ENGINE_BACKENDS``), else its own (the ``vertex`` engine's stand-in: ``customjobs``)."""
    engine.module(engine_name)  # ValueError naming the engines for another
    allowed = ENGINE_BACKENDS[engine_name]
    return "local" if "local" in allowed else allowed[0]
