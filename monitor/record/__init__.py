"""The session record: one SQLite file per layout, written tick by tick and read back."""
