"""`python -m infertop` runs the CLI."""

from infertop.cli.main import entry

entry()
