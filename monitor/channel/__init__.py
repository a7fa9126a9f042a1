"""The local channel between a monitor process and its viewers.

One monitor per layout serves a Unix socket in the state directory (`paths.py`); viewers
(`client.py`: `SocketFeed`, and the one-shot `call` of `ps`, `stop`, `phase`) connect to it.
The wire is newline-delimited JSON (`protocol.py`); the server (`server.py`) pushes the
newest Snapshot to each subscribed viewer, latest wins.
"""
