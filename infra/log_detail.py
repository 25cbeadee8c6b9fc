"""Log records meant for the run's log file (and ``-v``), not for the terminal.

``logger.info(..., extra=DETAIL)``: the CLI's screen drops such records unless verbose; the
run's log file keeps them (e.g. the placement of every worker group and the device of
every worker, a few lines per worker).
"""

from __future__ import annotations

#: Attribute a record carries when it is detail (see :data:`DETAIL`).
DETAIL_FIELD = "rlpipe_detail"
#: ``extra`` of a detail record.
DETAIL = {DETAIL_FIELD: True}
