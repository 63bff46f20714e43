"""Next to a running ``landfall up`` stack, a command (status, republish, upload, trace, report) uses it only when
nothing names another target (``landfall.local.stack.use_running_stack``): all or nothing, and one line on stderr
when it does.

The stack is faked: a ``stack.json`` whose pid is this process's, which ``read_running`` takes as running.
The commands' work is replaced by a recorder of the environment it would run in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from landfall import cli
from landfall.cli import jobs, report, status, trace

TARGET_ENV = ("LANDFALL_BUCKET", "GOOGLE_CLOUD_PROJECT", "LANDFALL_BACKEND", "LANDFALL_LOCAL_STATE",
              "STORAGE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST")
USER_ENV = {"LANDFALL_BUCKET": "prod-bucket", "GOOGLE_CLOUD_PROJECT": "prod-project", "LANDFALL_BACKEND": "kubernetes",
            "STORAGE_EMULATOR_HOST": "http://127.0.0.1:1", "PUBSUB_EMULATOR_HOST": "127.0.0.1:2"}


@pytest.fixture
def fake_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A running stack on ``tmp_path/.landfall`` (the default state folder there); no target in the environment."""
    for key in (*TARGET_ENV, "LANDFALL_STATE_DIR"):
        monkeypatch.setenv(key, "")  # recorded, so whatever the command sets is undone after the test
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    state = tmp_path / ".landfall"
    state.mkdir()
    info = {"pid": os.getpid(), "state_dir": str(state), "project": "landfall-local", "bucket": "landfall-local",
            "pubsub_emulator_host": "127.0.0.1:8681", "storage_emulator_host": "http://127.0.0.1:4443",
            "local_state": str(state / "local"), "processes": {"operator": os.getpid()}}
    (state / "stack.json").write_text(json.dumps(info))
    return info


def stack_env(info: dict) -> dict[str, str]:
    return {"LANDFALL_BUCKET": info["bucket"], "GOOGLE_CLOUD_PROJECT": info["project"], "LANDFALL_BACKEND": "local",
            "LANDFALL_LOCAL_STATE": info["local_state"], "STORAGE_EMULATOR_HOST": info["storage_emulator_host"],
            "PUBSUB_EMULATOR_HOST": info["pubsub_emulator_host"]}


def recorder(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str | None]]:
    """Replaces what ``status``, ``republish`` and ``upload`` do with a record of the environment they see."""
    seen: list[dict[str, str | None]] = []

    def record(*_: object) -> int:
        seen.append({key: os.environ.get(key) for key in TARGET_ENV})
        return 0

    class Storage:
        def __init__(self, *_: object) -> None:
            pass

        def upload(self, *_: object) -> None:
            record()

    monkeypatch.setattr(status, "status", record)
    monkeypatch.setattr(trace, "print_trace", record)
    monkeypatch.setattr(report, "write_report", record)
    monkeypatch.setattr(jobs, "republish", record)
    monkeypatch.setattr("landfall.core.services.storage.Storage", Storage)
    return seen


COMMANDS = {
    "status": ["status"],
    "republish": ["republish", "--dataset", "d"],
    "upload": ["upload", "file.npy", "--dataset", "d"],
    "trace": ["trace", "some-job"],
    "report": ["report", "--out", "r.html"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_no_target_named_uses_the_stack_and_says_so_once(command, fake_stack, monkeypatch, capsys):
    seen = recorder(monkeypatch)
    assert cli.main(COMMANDS[command]) == 0
    assert seen == [stack_env(fake_stack)]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"landfall {command}: using the local stack on .landfall (gs://landfall-local, ")
    assert "http://127.0.0.1:4443" in err[0] and "to target elsewhere" in err[0]


FLAGS = {
    "status": [["--bucket", "prod-bucket"], ["--project", "prod-project"], ["--backend", "kubernetes"],
               ["--state", "elsewhere"]],
    "republish": [["--bucket", "prod-bucket"], ["--project", "prod-project"]],
    "trace": [["--bucket", "prod-bucket"], ["--project", "prod-project"], ["--backend", "kubernetes"],
              ["--state", "elsewhere"]],
    "report": [["--bucket", "prod-bucket"], ["--project", "prod-project"], ["--backend", "kubernetes"],
               ["--state", "elsewhere"]],
}


@pytest.mark.parametrize(("command", "flags"), [(c, f) for c, fs in FLAGS.items() for f in fs])
def test_a_flag_naming_a_target_leaves_everything_alone(command, flags, fake_stack, monkeypatch, capsys):
    seen = recorder(monkeypatch)
    assert cli.main(COMMANDS[command] + flags) == 0
    assert seen == [dict.fromkeys(TARGET_ENV)]  # not even the emulator hosts: all or nothing
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("key", USER_ENV)
def test_a_variable_naming_a_target_leaves_everything_alone(command, key, fake_stack, monkeypatch, capsys):
    seen = recorder(monkeypatch)
    monkeypatch.setenv(key, USER_ENV[key])
    if command == "upload" and key != "LANDFALL_BUCKET":  # the stack is not used, and no bucket is named
        assert cli.main(COMMANDS[command]) == 1
        assert seen == []
        assert f"but {key} names another target" in capsys.readouterr().err
        return
    assert cli.main(COMMANDS[command]) == 0
    assert seen == [{**dict.fromkeys(TARGET_ENV), key: USER_ENV[key]}]
    assert capsys.readouterr().err == ""


def test_a_manifest_in_another_bucket_is_a_target(fake_stack, monkeypatch, capsys):
    seen = recorder(monkeypatch)
    assert cli.main(["republish", "--manifest", "gs://prod-bucket/tfrecords/d/a/manifest.json"]) == 0
    assert seen == [dict.fromkeys(TARGET_ENV)] and capsys.readouterr().err == ""
    assert cli.main(["republish", "--manifest", "gs://landfall-local/tfrecords/d/a/manifest.json"]) == 0
    assert seen[1] == stack_env(fake_stack) and "using the local stack" in capsys.readouterr().err


def test_naming_the_stacks_own_targets_is_no_conflict(fake_stack, monkeypatch, capsys):
    """The stack's own values (its exports, or --bucket of its bucket) name no other target: the stack is used."""
    seen = recorder(monkeypatch)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", fake_stack["project"])
    assert cli.main(["status", "--bucket", fake_stack["bucket"], "--state", ".landfall/local"]) == 0
    assert seen == [stack_env(fake_stack)]
    assert "using the local stack" in capsys.readouterr().err


def test_no_running_stack_changes_nothing(fake_stack, tmp_path, monkeypatch, capsys):
    (tmp_path / ".landfall" / "stack.json").write_text(json.dumps({**fake_stack, "pid": 2**22 + 1}))  # not running
    seen = recorder(monkeypatch)
    assert cli.main(["status"]) == 0
    assert seen == [dict.fromkeys(TARGET_ENV)] and capsys.readouterr().err == ""
