"""The demo's page sizes (`--pages`): a module of its own, so that the CLI's parser names them
without importing the demo server (aiohttp)."""

from __future__ import annotations

PAGE_SIZES = ("realistic", "small")
