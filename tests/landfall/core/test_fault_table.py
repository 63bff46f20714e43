"""The fault table of docs/datasets.md#arrival-checks (#39), on two public multichannel recordings that ship in the
repo (bench/data: Daphnet S06R02E0, 9 channels at 64 Hz with its timestamps; BasicMotions, 6 channels at 10 Hz;
``tests/landfall/core/faults.py`` says how they are cut into arrivals and how each fault is put in). Each arrival is
checked clean, then with each fault alone, against the reference of the clean arrivals before it; the clean ones are
the false-flag count. ``pytest tests/landfall/core/test_fault_table.py -s`` prints the table."""

from __future__ import annotations

import numpy as np
import pytest

from landfall.core.quality import checks
from landfall.core.quality.profile import Profile
from tests.landfall.core import faults


def table(rec: faults.Recording) -> tuple[int, list[str], dict[str, tuple[int, int, dict[str, int]]]]:
    """(arrivals checked, clean arrivals flagged, per fault: (caught by the check meant for it, on the right
    feature; caught by any check; findings by check))."""
    rules, rng = checks.Rules.parse({}), np.random.default_rng(0)
    reference, checked, false_flags = Profile(len(rec.channels)), 0, []
    out = {k: [0, 0, {}] for k in faults.FAULTS}
    for i, arrival in enumerate(rec.arrivals):
        clean = faults.profile_of(*arrival)
        result = checks.assess(clean, reference if i else None, rules, rec.channels)
        false_flags += [f"#{i}: {f.line()}" for f in result.findings]
        if i >= rec.first_checked:
            checked += 1
            for kind, (fault, check, role) in faults.FAULTS.items():
                found = checks.assess(faults.profile_of(*fault(rec, arrival, rng)), reference, rules,
                                      rec.channels).findings
                out[kind][0] += any(f.check == check and f.feature in faults.features_of(rec, role) for f in found)
                out[kind][1] += bool(found)
                for f in found:
                    out[kind][2][f.check] = out[kind][2].get(f.check, 0) + 1
        if result.status != "quarantined":
            reference.merge(clean)
    return checked, false_flags, {k: (v[0], v[1], v[2]) for k, v in out.items()}


# fault: (Daphnet: by its check, by any), (BasicMotions: by its check, by any): measured 2026-12-03
EXPECTED = {
    "offset channel x1000": ((94, 94), (70, 70)),
    "offset channel stuck": ((94, 94), (70, 70)),
    "offset and zero-centred channels swapped": ((94, 94), (2, 25)),
    "channel copied into its twin": ((94, 94), (70, 70)),
    "channel copied, 5 % noise added": ((94, 94), (70, 70)),
    "zero-centred channel's polarity flipped": ((0, 0), (0, 0)),
    "zero-centred channel half an arrival late": ((0, 0), (0, 0)),
    "decimated x2 (own timestamps)": ((94, 94), (70, 70)),
    "decimated x2, stamped at the old rate": ((0, 0), (0, 2)),
    "upsampled x2 (interpolated)": ((94, 94), (70, 70)),
    "time in milliseconds, not seconds": ((94, 94), (70, 70)),
    "zero-centred channel x2": ((0, 1), (0, 0)),
    "zero-centred channel x3": ((27, 28), (2, 2)),
    "zero-centred channel x5": ((90, 92), (37, 37)),
    "zero-centred channel x9.81": ((83, 94), (65, 67)),
    "offset channel x2": ((0, 16), (0, 0)),
    "offset channel x3": ((23, 64), (12, 12)),
    "offset channel x5": ((0, 94), (22, 22)),
    "offset channel x9.81": ((0, 94), (56, 59)),
}


@pytest.mark.parametrize("which", [0, 1], ids=["daphnet", "basic_motions"])
def test_the_fault_table_and_no_false_flag(which):
    rec = (faults.daphnet(), faults.basic_motions())[which]
    checked, false_flags, rows = table(rec)
    print(f"\n{rec.name}: {checked} arrivals checked, {len(false_flags)} clean arrivals flagged of "
          f"{len(rec.arrivals)}")
    print("| fault | meant for | caught by it | caught by any | findings |\n|---|---|---|---|---|")
    for kind, (named, anything, by) in rows.items():
        print(f"| {kind} | `{faults.FAULTS[kind][1]}` | {named} of {checked} | {anything} of {checked} | "
              f"{', '.join(f'{k} {v}' for k, v in sorted(by.items()))} |")
    assert checked == (94, 70)[which]
    assert false_flags == []
    assert {k: (v[0], v[1]) for k, v in rows.items()} == {k: v[which] for k, v in EXPECTED.items()}
