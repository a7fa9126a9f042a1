"""The probe: the stdlib-only program bundled and sent to nodes over SSH (main.py), its
helpers, and the bundler that pastes them into one script (bundle.py)."""
