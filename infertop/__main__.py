"""`python -m infertop` runs the CLI."""

from infertop.front_door import entry

entry()
