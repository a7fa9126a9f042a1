"""The user's own defaults: `~/.config/infertop/config.toml` (or $XDG_CONFIG_HOME, or the
file $INFERTOP_CONFIG names). Settings for the person, not the cluster:

    interval_s = 2.0          # poll interval when the layout does not set one
    theme = "textual-light"   # the TUI's colour theme (any Textual theme)
    [alerts]                  # the bell, when the layout has no [alerts] of its own
    bell = true
    on = "warning"

Precedence, lowest first: built-in default, this file, the layout, the command line
(`--interval`). A missing file is no error; a bad one is (exit 2, file:line: field).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infertop.layouts.loader import LayoutError
from infertop.layouts.model import MAX_INTERVAL_S, AlertsConfig

MAX_CONFIG_BYTES = 64 * 1024


class UserConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    interval_s: Annotated[float, Field(gt=0, le=MAX_INTERVAL_S)] | None = None
    theme: str | None = None
    alerts: AlertsConfig | None = None  # the person's bell, for layouts that set none


def config_path() -> Path:
    explicit = os.environ.get("INFERTOP_CONFIG")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else Path.home() / ".config"
    return base / "infertop" / "config.toml"


def _line_of(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


def parse_user_config(text: str, path: str) -> UserConfig:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+)", str(exc))
        msg = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(exc))
        line = int(found.group(1)) if found else None
        raise LayoutError(path, None, f"TOML syntax error: {msg}", line) from None
    try:
        return UserConfig.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            unknown = err["type"] == "extra_forbidden"
            msg = "unknown setting (known: interval_s, theme, [alerts])" if unknown else str(err["msg"])
            problems.append(LayoutError(path, key or None, msg, _line_of(text, key.split(".")[-1])))
        first = problems[0]
        first.problems = problems
        raise first from None


def load_user_config(path: Path | None = None) -> UserConfig:
    """The user's config; defaults when the file does not exist. Raises LayoutError."""
    path = path or config_path()
    try:
        data = path.read_bytes()[: MAX_CONFIG_BYTES + 1]
    except FileNotFoundError:
        return UserConfig()
    except IsADirectoryError:
        raise LayoutError(str(path), None, "is a directory, not a config file") from None
    except OSError as exc:
        raise LayoutError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise LayoutError(str(path), None, f"larger than {MAX_CONFIG_BYTES // 1024} KiB: not a config file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LayoutError(str(path), None, "not UTF-8 text") from None
    return parse_user_config(text, str(path))
