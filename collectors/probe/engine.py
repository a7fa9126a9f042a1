"""The probe's engine fetch: the engine's /metrics read from the node's own side.

A stdlib-only helper bundled into the probe (see collectors/probe/bundle.py): engines
often listen on localhost only, so the probe fetches the text on the node and ships it
back; the infertop side parses it with the scrape source's parser. Only the lines the
infertop side can use travel: histogram buckets and HELP text are most of an engine's
exposition, and EngineSample keeps only sums and counts.

Its error line names the URL without its password or token (`collectors/safe_text.py`,
bundled before this file): the line travels to infertop, is shown and is recorded.
"""

# bundle: strip-begin
from infertop.collectors.safe_text import redact_text, redact_url, url_secrets

# bundle: strip-end

ENGINE_MAX_BYTES = 2000000
# the buckets that do travel: the latency histograms the scoreboard reads its percentiles
# from (collectors/pages/histograms.py LATENCY_HISTOGRAMS; a test holds the two equal)
KEEP_BUCKETS = tuple(
    base + "_bucket"
    for base in (
        "vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
        "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds",
        "vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds", "sglang:queue_time_seconds",
        "vllm:nixl_xfer_time_seconds",
    )
)


def fetch_engine(url, timeout_s, max_bytes=ENGINE_MAX_BYTES):
    """(text, error): the engine's Prometheus text, or None and one line saying why."""
    import urllib.request

    # proxies are for leaving the node; the engine listens on it
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout_s) as resp:
            body = _read_whole(resp, max_bytes + 1)
    except Exception as exc:  # URLError, timeout, connection refused, HTTP 5xx, …
        # urllib may quote the password without its URL ("nonnumeric port: 'pw@host'")
        line = redact_text(_engine_error_line(exc), url_secrets(url))
        return None, f"engine {redact_url(url)}: {line}"
    if len(body) > max_bytes:
        return None, f"engine {redact_url(url)}: more than the {max_bytes}-byte cap of metrics"
    keep = []
    for line in body.decode("utf-8", errors="replace").splitlines():
        if line.startswith("# HELP"):
            continue
        if ("_bucket{" in line or line.endswith("_bucket")) and not line.startswith(KEEP_BUCKETS):
            continue
        keep.append(line)
    return "\n".join(keep) + "\n", None


def _read_whole(resp, limit):
    """Up to `limit` bytes, read until the end of the body: a big page (a node with 8
    data-parallel engines serves ~320 KB) arrives in many pieces, and one short read
    must never pass for the whole page."""
    pieces = []
    size = 0
    while size < limit:
        piece = resp.read(min(65536, limit - size))
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)


def _engine_error_line(exc):
    text = f"{exc.__class__.__name__}: {exc}".replace("\n", " ").replace("\r", " ")
    return text[:200]
