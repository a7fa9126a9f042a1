"""`python -m infertop` runs the CLI."""

from infertop.cli import entry

entry()
