"""A dataset's retrain policy, and the one pure decision: release the next job now, or hold it, why, until when.

``RetrainPolicy`` (a dataset spec's ``retrain`` section over the process-wide ``LANDFALL_*`` defaults); every rule
is off by default, which is today's behaviour: a job is released as soon as its predecessor ended.

- ``quiet_s``: released only once no new request arrived for that long (a burst becomes one job) ...
- ``max_wait_s``: ... or once the oldest waiting request has waited this long. Unset, the bound is
  ``DEFAULT_MAX_WAIT_S`` (a day, the horizon of the two budgets below): every hold of ``quiet_s`` and
  ``min_new_instances`` ends, so an endless trickle, or a last small arrival, is never stranded.
- ``min_new_instances``: held while the waiting arrivals add fewer instances than this (until the bound above).
  A manual request (``landfall republish``: someone asked for this run) satisfies it whatever it adds.
- ``max_jobs_per_day``: at most this many jobs released over any rolling 24 h; held until the oldest of them
  leaves the window.
- ``gpu_hours_per_day``: held while the GPU-hours of the jobs that ended in the last rolling 24 h reach the
  budget, until enough of them leave the window. A job's cost is known only once it ends, so the budget is
  checked before a release: the last job released may overshoot it, by at most its own cost.

The budgets are hard (``max_wait_s`` does not override them); each hold is bounded by the 24 h window. A
held release waits: the requests stay pending and the reconciler releases them once ``decide`` allows
(``landfall.submit.coalesce``). ``decide`` is pure; the caller passes ``now`` from its clock, so a test passes a
fake one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from landfall.core.config import Settings

DAY_S = 86400.0
DEFAULT_MAX_WAIT_S = DAY_S
FIELDS = ("quiet_s", "max_wait_s", "min_new_instances", "max_jobs_per_day", "gpu_hours_per_day")


@dataclasses.dataclass(frozen=True)
class RetrainPolicy(Settings):
    """Environment defaults: ``LANDFALL_QUIET_S``, ``LANDFALL_MAX_WAIT_S``, ``LANDFALL_MIN_NEW_INSTANCES``,
    ``LANDFALL_MAX_JOBS_PER_DAY``, ``LANDFALL_GPU_HOURS_PER_DAY``; 0 is off."""

    quiet_s: float = 0.0
    max_wait_s: float = 0.0
    min_new_instances: int = 0
    max_jobs_per_day: int = 0
    gpu_hours_per_day: float = 0.0

    def __post_init__(self) -> None:
        for name in FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != value:
                raise ValueError(f"retrain policy {name} must be a number >= 0, not {value!r}")
        if self.max_wait_s and self.quiet_s > self.max_wait_s:
            raise ValueError(f"retrain policy quiet_s ({self.quiet_s:g}) must not exceed max_wait_s "
                             f"({self.max_wait_s:g}): the quiet period would never be waited out")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, base: RetrainPolicy | None = None) -> RetrainPolicy:
        """A spec's ``retrain`` section (only the keys it sets) over ``base`` (the environment's defaults)."""
        base = base or cls()
        mapping = mapping or {}
        unknown = sorted(set(mapping) - set(FIELDS))
        if unknown:
            raise ValueError(f"retrain policy: unknown field(s) {', '.join(unknown)} (known: {', '.join(FIELDS)})")
        return dataclasses.replace(base, **{k: mapping[k] for k in FIELDS if k in mapping})

    @property
    def active(self) -> bool:
        return any(getattr(self, name) for name in FIELDS)

    @property
    def wait_bound_s(self) -> float:
        """How long the oldest waiting request may be held by ``quiet_s`` or ``min_new_instances``."""
        return float(self.max_wait_s or DEFAULT_MAX_WAIT_S)

    def describe(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS if getattr(self, name)}


@dataclasses.dataclass(frozen=True)
class Waiting:
    """A request waiting for the dataset's next job: when it was recorded, and what it adds."""

    recorded_at: float
    instances: int | None = None  # its arrival's instances; None: not counted (the rule is not applied)
    manual: bool = False


@dataclasses.dataclass(frozen=True)
class PastJob:
    """One of the dataset's recent jobs: when it was released, when it ended (None: not yet), its GPU-seconds."""

    released_at: float
    ended_at: float | None = None
    gpu_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class Hold:
    rule: str  # quiet_s | min_new_instances | max_jobs_per_day | gpu_hours_per_day
    reason: str
    until: float


@dataclasses.dataclass(frozen=True)
class Decision:
    holds: tuple[Hold, ...] = ()

    @property
    def release(self) -> bool:
        return not self.holds

    @property
    def until(self) -> float | None:
        """The earliest moment every hold has ended, if nothing new arrives."""
        return max(h.until for h in self.holds) if self.holds else None

    @property
    def reason(self) -> str:
        return "; ".join(h.reason for h in self.holds)


def decide(policy: RetrainPolicy, waiting: Sequence[Waiting], jobs: Sequence[PastJob], now: float) -> Decision:
    """Release now, or the holds (each with its reason and the time it ends). Pure."""
    holds = [h for h in (_jobs_per_day(policy, jobs, now), _gpu_budget(policy, jobs, now)) if h]
    if waiting:
        oldest = min(w.recorded_at for w in waiting)
        bound = oldest + policy.wait_bound_s
        holds += [h for h in (_quiet(policy, waiting, now, bound), _min_new(policy, waiting, now, bound)) if h]
    return Decision(tuple(holds))


def _quiet(policy: RetrainPolicy, waiting: Sequence[Waiting], now: float, bound: float) -> Hold | None:
    if not policy.quiet_s:
        return None
    newest = max(w.recorded_at for w in waiting)
    until = min(newest + policy.quiet_s, bound)
    if now >= until:
        return None
    return Hold("quiet_s", f"quiet period: the last request came {max(0.0, now - newest):.0f} s ago, "
                           f"quiet_s is {policy.quiet_s:g} (at most {policy.wait_bound_s:g} s after the oldest)", until)


def _min_new(policy: RetrainPolicy, waiting: Sequence[Waiting], now: float, bound: float) -> Hold | None:
    if not policy.min_new_instances or now >= bound or any(w.manual for w in waiting):
        return None
    if any(w.instances is None for w in waiting):
        return None  # not counted yet: the caller counts before it releases
    added = sum(int(w.instances or 0) for w in waiting)
    if added >= policy.min_new_instances:
        return None
    return Hold("min_new_instances", f"the waiting arrivals add {added} instances, min_new_instances is "
                                     f"{policy.min_new_instances} (released anyway {policy.wait_bound_s:g} s after "
                                     "the oldest)", bound)


def _jobs_per_day(policy: RetrainPolicy, jobs: Sequence[PastJob], now: float) -> Hold | None:
    if not policy.max_jobs_per_day:
        return None
    recent = sorted(j.released_at for j in jobs if j.released_at > now - DAY_S)
    if len(recent) < policy.max_jobs_per_day:
        return None
    # Released again once all but max_jobs_per_day - 1 of them have left the window.
    until = recent[len(recent) - policy.max_jobs_per_day] + DAY_S
    return Hold("max_jobs_per_day", f"{len(recent)} jobs released in the last 24 h, max_jobs_per_day is "
                                    f"{policy.max_jobs_per_day}", until)


def _gpu_budget(policy: RetrainPolicy, jobs: Sequence[PastJob], now: float) -> Hold | None:
    if not policy.gpu_hours_per_day:
        return None
    budget = policy.gpu_hours_per_day * 3600.0
    ended = sorted((j.ended_at, float(j.gpu_seconds or 0.0)) for j in jobs
                   if j.ended_at is not None and j.ended_at > now - DAY_S)
    spent = sum(s for _, s in ended)
    if spent < budget:
        return None
    left, until = spent, now
    for ended_at, seconds in ended:  # the oldest leave the window first
        left -= seconds
        until = ended_at + DAY_S
        if left < budget:
            break
    return Hold("gpu_hours_per_day", f"{spent / 3600:.3g} GPU-hours spent in the last 24 h, gpu_hours_per_day is "
                                     f"{policy.gpu_hours_per_day:g}", until)


def window_spend(jobs: Sequence[PastJob], now: float, window_s: float = DAY_S) -> float:
    """GPU-seconds of the jobs that ended within ``window_s`` before ``now``."""
    return sum(float(j.gpu_seconds or 0.0) for j in jobs if j.ended_at is not None and j.ended_at > now - window_s)
