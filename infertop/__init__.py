"""infertop: live terminal monitor for DeepSeek/DeepInfer-style inference clusters."""

__version__ = "0.1.0"
