"""A stand-in engine for log tests: appends a formatted stats line every 0.5 s for N s.

Run as `python -c LOG_WRITER PATH TEXT SECONDS` (locally or inside a test namespace);
`{s}` in TEXT becomes a changing seconds field so every line is new.
"""

LOG_WRITER = """
import sys, time
path, text = sys.argv[1], sys.argv[2]
end = time.monotonic() + float(sys.argv[3])
i = 0
while time.monotonic() < end:
    with open(path, "a") as f:
        f.write(text.format(s=i % 60))
    i += 1
    time.sleep(0.5)  # the engine's cadence being imitated, in its own process: not a wait
"""
