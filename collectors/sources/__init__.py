"""The sources: what reads each part of a node (routing.py decides which), and how:
this machine, the SSH probe, HTTP pages (in workers), an engine log, PromQL."""
