"""infertop: live terminal monitor for DeepSeek/DeepInfer-style inference clusters."""

from infertop.monitor import VERSION as __version__  # one version: the installed distribution's

__all__ = ["__version__"]
