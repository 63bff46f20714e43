"""Crash points after ``fit``: where the tests kill a worker with a real SIGSEGV (#46).

A worker that dies after training must cost nothing twice: a restart that finds the job's results complete exits 0
without training (and announces the result if the crash came before that); one that finds them incomplete resumes
exactly, training no epoch again. The tests prove it by crashing a real trainer at each point below, once, with the
signal a native crash sends. ``LANDFALL_CRASH_AT=<point>:<marker>`` arms it: at ``point`` the worker creates
``marker`` (create-only, so the restart, which finds it, goes on) and sends itself SIGSEGV. Unset, as in every
deployment, ``at`` does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

ENV = "LANDFALL_CRASH_AT"
SAVED = "saved"  # the model is in the job dir; no verdict yet
EVALUATED = "evaluated"  # the verdict is in metrics.json's memory, not yet recorded as succeeded
FINISHED = "finished"  # metrics.json says succeeded: the results are complete
ANNOUNCED = "announced"  # the result is published; the process has not exited yet
POINTS = (SAVED, EVALUATED, FINISHED, ANNOUNCED)


def at(point: str) -> None:
    """Crashes this worker here if ``LANDFALL_CRASH_AT`` names ``point`` and its marker does not exist yet."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    where, _, marker = spec.partition(":")
    if where != point:
        return
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # crashed here once already: this is the restart
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.kill(os.getpid(), signal.SIGSEGV)  # as a native crash: faulthandler, where enabled, dumps every stack first
