"""One reading of the bucket for every view (issue #56): ``landfall status``, ``landfall trace`` and ``landfall
report`` (and the demo's page) display what this package returns, as text, JSON and HTML.

- ``landfall.views.reader``: named, read-only reads of one bucket's records and its jobs' state (``Reader``);
- ``landfall.views.arrivals``: every arrival listed once and classified once (live, quarantined, retracted,
  converting, rejected; warned, failing), with the one answer to "held back?" (``core.contracts.messages.holds_back``);
- ``landfall.views.waiting``: why a dataset's waiting requests wait, one explanation (``submit.coalesce.explain``)
  and its one line of text;
- ``landfall.views.page``: the report as data (``collect``) and as one self-contained HTML page (``render``).

Read-only: nothing here writes to the bucket. It sits under ``landfall.cli`` and ``landfall.local`` (the laptop stack,
whose demo writes the page) and over the stages, so a production command reads production buckets through it
without the laptop stack.
"""
