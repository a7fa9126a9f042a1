"""The front door: `main.py` builds the parser from the subcommand modules here."""
