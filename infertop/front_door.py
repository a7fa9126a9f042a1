"""The installed `infertop` command and `python -m infertop` start here.

Only the library-warnings gate comes before the program is imported: importing the CLI
imports asyncssh, textual, pydantic …, and a library that warns at import time (cryptography
about DSA, under asyncssh) must already find the gate in place.

A signal that comes while the program is still loading (seconds on a host whose cores an
engine saturates) ends it as one would later: an exit status of 128 + the signal, no
traceback, not a death by signal. Each command installs its own handling once it runs.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import NoReturn


def _stopped_while_loading(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def entry() -> NoReturn:
    from infertop.collectors.process import library_warnings

    library_warnings.install()
    signal.signal(signal.SIGTERM, _stopped_while_loading)
    try:
        from infertop.cli.main import entry as run
    except KeyboardInterrupt:
        sys.exit(128 + signal.SIGINT)
    run()
