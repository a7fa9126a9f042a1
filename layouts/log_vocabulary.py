"""The vocabulary of engine-log patterns: the kinds a pattern may be, the canonical
quantities it may fill, and the bundled pattern sets a layout may name.

Shared by the layout (which checks a user's patterns by these names) and the log parser
that runs on the nodes (collectors/probe/logs.py): standard library only, no imports, so
the SSH probe bundle pastes this file's text as it is.
"""

BUILTIN_PATTERN_SETS = ("vllm", "sglang", "deepinfer-offline")
LOG_PATTERN_KINDS = ("counter", "count", "rate", "gauge")
# canonical quantities a user pattern may fill: counters, then gauges, then helpers
LOG_COUNTER_QUANTITIES = (
    "steps",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
    "generation_tokens",
    "prompt_tokens",
    "prompt_cached_tokens",
    "requests_finished",
)
LOG_GAUGE_QUANTITIES = ("requests_running", "requests_waiting", "kv_cache_usage")
# not engine fields themselves: used within one line to derive drafts / draft tokens
LOG_HELPER_QUANTITIES = ("mean_acceptance_length", "draft_acceptance")
LOG_QUANTITIES = LOG_COUNTER_QUANTITIES + LOG_GAUGE_QUANTITIES + LOG_HELPER_QUANTITIES
