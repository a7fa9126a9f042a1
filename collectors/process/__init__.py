"""Process plumbing: library warnings, event-loop stalls, GC tuning and pacing, stopping.
Imports nothing else of infertop, so every room may use it."""
