"""Helpers the tests share: real servers, processes, frozen feeds, and `until` (waiting.py).

Import them as `tests.support.<module>`; the repository root is on pytest's path, `tests/` is not.
"""
