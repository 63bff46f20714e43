"""``landfall bench trainer-stress`` (#46) counts how real trainers exit under load and names a crash's frame: here
each run is made to crash with a real SIGSEGV after saving its model (``trainer.faults``, inherited through the
environment), and the harness reports every one of them, with the dump faulthandler printed."""

from __future__ import annotations

import json

from landfall_bench import stress
from trainer import faults


def test_the_stress_harness_counts_crashes_and_keeps_their_frames(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(faults.ENV, faults.SAVED)  # no marker: every run crashes there
    out = tmp_path / "stress.json"
    code = stress.main(["--runs", "2", "--parallel", "2", "--burners", "0", "--instances", "128", "--epochs", "1",
                        "--cores", str(tmp_path / "cores"), "--json", str(out)])
    assert code == 1
    result = json.loads(out.read_text())
    assert result["runs"] == 2 and result["crashes"] == 2 and result["exit_codes"] == {"-11 (SIGSEGV)": 2}
    text = capsys.readouterr().out
    assert "2 trainer runs, 2 at a time beside 0 CPU burner(s)" in text and "2 crashed" in text
    assert "Fatal Python error: Segmentation fault" in text and "trainer/faults.py" in text  # the frame
    assert sorted(p.name for p in (tmp_path / "cores").iterdir()) == ["run-0", "run-1"]
    assert all((tmp_path / "cores" / r / "stderr").exists() for r in ("run-0", "run-1"))
