"""``landfall rescore``: a new champion goes back over old arrivals only when asked, each (arrival, champion) scored
and announced once; ``--since`` picks the arrivals committed from then on."""

from __future__ import annotations

import json

from landfall import cli
from landfall.detect import handler
from tests.conftest import pull_all, unique

from .helpers import SERIES_SPEC, commit, crown, scorer_runtime, series_frame, store_spec, zero_model


def test_rescore_asks_the_current_champion_once_per_arrival(emulator_stack, bucket, topic, arrival_runtime,
                                                            tmp_path, capsys):
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    detections_topic, requests = unique("detections"), unique("score-requests")
    for name in (detections_topic, requests):
        pubsub.ensure_topic(name)
        pubsub.ensure_subscription(name, name)
    store_spec(storage, bucket, SERIES_SPEC)
    arrivals = [commit(storage, arrival_runtime, bucket, f"incoming/pump/{i}.csv",
                       series_frame(seed=i).to_csv(index=False).encode(), pubsub, topic) for i in range(2)]
    rt = scorer_runtime(emulator_stack, bucket, detections_topic)
    assert [handler.handle(r.to_json(), {}, rt) for r in arrivals] == ["no_champion"] * 2

    model = zero_model(tmp_path / "m", (4, 1))
    crown(storage, bucket, "pump", model)  # a champion now: nothing happens to the old arrivals by itself
    assert storage.list(f"gs://{bucket}/scores/") == []

    def rescore(*extra: str) -> dict:
        capsys.readouterr()
        assert cli.main(["rescore", "--dataset", "pump", "--bucket", bucket, "--project", emulator_stack.project,
                         "--topic", requests, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    assert rescore("--since", "2999-01-01")["arrivals"] == 0
    assert rescore("--dry-run") == {"dataset": "pump", "champion_run": "job-1", "arrivals": 2, "published": 0,
                                    "topic": requests, "since": None, "dry_run": True}
    assert rescore("--since", "2020-01-01T00:00Z")["published"] == 2
    asked = pull_all(pubsub, requests, expect=2)
    assert sorted(handler.handle(m.data, m.attributes, rt) for m in asked) == ["published", "published"]
    sent = pull_all(pubsub, detections_topic, expect=2)
    assert sorted(json.loads(m.data)["arrival"] for m in sent) == sorted(
        r.manifest.rsplit("/", 2)[-2] for r in arrivals)
    assert all(json.loads(m.data)["reason"] == "rescore" for m in sent)

    rescore()  # again, same champion: answered from the results, nothing new sent
    assert [handler.handle(m.data, m.attributes, rt) for m in pull_all(pubsub, requests, expect=2)] == [
        "duplicate"] * 2
    assert pull_all(pubsub, detections_topic, timeout_s=3) == []

    crown(storage, bucket, "pump", model, run="job-2")  # a new champion, asked again: its own results
    rescore()
    assert [handler.handle(m.data, m.attributes, rt) for m in pull_all(pubsub, requests, expect=2)] == [
        "published"] * 2
    assert {json.loads(m.data)["champion"]["run"] for m in pull_all(pubsub, detections_topic, expect=2)} == {"job-2"}
    assert len(storage.list(f"gs://{bucket}/scores/", suffix="/summary.json")) == 4
