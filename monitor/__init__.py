"""The monitor: fleet state, evaluation, the session record, snapshots for every viewer."""

from importlib import metadata

try:
    VERSION = metadata.version("infertop")
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "0+unknown"
