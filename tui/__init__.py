"""The Textual terminal UI. Renders immutable `Snapshot`s from a `SnapshotFeed`; no I/O."""
