"""The installed `infertop` command and `python -m infertop` start here.

Only the library-warnings gate comes before the program is imported: importing the CLI
imports asyncssh, textual, pydantic …, and a library that warns at import time (cryptography
about DSA, under asyncssh) must already find the gate in place.
"""

from __future__ import annotations

from typing import NoReturn


def entry() -> NoReturn:
    from collectors import library_warnings

    library_warnings.install()
    from infertop.cli.main import entry as run

    run()
