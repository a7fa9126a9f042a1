"""The layout: what the cluster is, where its figures come from, what it costs.

Validated by pydantic with `extra="forbid"` everywhere so that a typo in a key is an
error, not a silently ignored setting.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from typing import Annotated, Literal
from urllib.parse import urlparse

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from infertop.layouts.log_vocabulary import BUILTIN_PATTERN_SETS, LOG_PATTERN_KINDS, LOG_QUANTITIES

Role = Literal["prefill", "decode", "mixed"]
PositiveFloat = Annotated[float, Field(gt=0)]
MAX_INTERVAL_S = 3600.0  # one poll an hour: longer is no monitor
MAX_WINDOW_S = 86400.0
NonNegFloat = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    # no field of a layout means anything at infinity or NaN (TOML writes both: `inf`,
    # `nan`): an `interval_s = inf` would poll once and never again
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def shown(value: str, limit: int = 80) -> str:
    """A layout value quoted for a one-line message: escapes visible (repr), length bounded."""
    return repr(value[:limit]) + ("…" if len(value) > limit else "")


# C0 and C1 controls and DEL: in a path, an argument or a header they are never meant,
# and on a terminal they are commands (a NUL also makes the OS call fail much later)
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# the probe's interpreter: a program name or path on the remote command line (quoted
# there too); never an option (`-…`), never words
_INTERPRETER = re.compile(r"[A-Za-z0-9_./+][A-Za-z0-9_./+-]{0,254}", re.ASCII)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}", re.ASCII)
_HTTP_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}", re.ASCII)  # RFC 9110 field name


def check_plain_text(value: str) -> str:
    """Non-empty, with no control characters (a path, an argument handed to the OS)."""
    if not value:
        raise ValueError("must not be empty")
    bad = _CONTROL_CHARS.search(value)
    if bad:
        raise ValueError(f"{shown(value)} holds the control character {bad.group()!r}")
    return value


def _check_interpreter(value: str) -> str:
    if not _INTERPRETER.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a program name or path (letters, digits, _./+-)")
    return value


def _check_env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(f"{shown(value)} is not an environment variable name")
    return value


def _check_header_name(value: str) -> str:
    if not _HTTP_TOKEN.fullmatch(value):
        raise ValueError(f"{shown(value)} is not an HTTP header name")
    return value


PathStr = Annotated[str, AfterValidator(check_plain_text)]
ArgStr = Annotated[str, AfterValidator(check_plain_text)]
EnvName = Annotated[str, AfterValidator(_check_env_name)]


def check_http_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"malformed URL {url!r}: expected http(s)://host[:port]/path")
    try:
        parsed.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise ValueError(f"malformed URL {url!r}: {exc}") from None
    return url


# An ssh target is substituted by asyncssh into the user's own ssh config (`%h` in a
# `ProxyCommand ssh -W %h:%p jump` or a `Match exec`), whose command line is then split
# into arguments or run by a shell: so a target is only what its grammar allows. User
# names as POSIX portable names; host names and ssh-config aliases as RFC 1123 labels
# (plus `_`, common in aliases); IPv6 literals only as addresses. No whitespace, no
# leading `-`, no `%`, no quotes, no shell metacharacters, nothing outside ASCII.
_SSH_TARGET_CHARS = re.compile(r"[A-Za-z0-9_.@:\[\]-]+", re.ASCII)
_SSH_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", re.ASCII)
_SSH_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_SSH_HOST = re.compile(rf"{_SSH_LABEL}(?:\.{_SSH_LABEL})*\.?", re.ASCII)
_SSH_HOST_MAX = 253
_SSH_PORT = re.compile(r"[0-9]{1,5}", re.ASCII)
_SSH_EXPECTED = "expected alias, user@host[:port] or user@[v6]:port"


def _ssh_port(text: str) -> int:
    if not _SSH_PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError(f"port {shown(text)} is not a number from 1 to 65535")
    return int(text)


def _ssh_host(host: str) -> str:
    if not _SSH_HOST.fullmatch(host) or len(host.rstrip(".")) > _SSH_HOST_MAX:
        raise ValueError(f"host {shown(host)} is not a host name or alias")
    return host


def _ssh_v6(text: str) -> str:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        raise ValueError(f"{shown(text)} is not an IPv6 address") from None
    return text


def _split_ssh_target(target: str) -> tuple[str | None, str, int | None]:
    if not target:
        raise ValueError("empty")
    if "{host}" in target:
        raise ValueError("{host} is replaced only in a hosts range")
    if target.startswith("-"):
        raise ValueError("starts with '-' (it would be read as an option)")
    if not _SSH_TARGET_CHARS.fullmatch(target):
        bad = next(ch for ch in target if not _SSH_TARGET_CHARS.fullmatch(ch))
        raise ValueError(f"character {bad!r} is not allowed")
    user, at, rest = target.rpartition("@")
    if at and not _SSH_USER.fullmatch(user):
        raise ValueError(f"user {shown(user)} is not a user name")
    if rest.startswith("["):
        inner, closed, tail = rest[1:].partition("]")
        if not closed:
            raise ValueError("'[' without ']'")
        if tail and not tail.startswith(":"):
            raise ValueError(f"{shown(tail)} after ']' (expected :port)")
        return user or None, _ssh_v6(inner), _ssh_port(tail[1:]) if tail else None
    if rest.count(":") > 1:  # a bare IPv6 address (no port: that needs brackets)
        return user or None, _ssh_v6(rest), None
    host, colon, port_text = rest.partition(":")
    return user or None, _ssh_host(host), _ssh_port(port_text) if colon else None


def split_ssh_target(target: str) -> tuple[str | None, str, int | None]:
    """(user, host, port) of an ssh target, None where the ssh config decides.

    Raises ValueError with a one-line message when the target is not user@host[:port],
    user@[v6]:port or an alias by their grammar (see above: it could become a command).
    """
    try:
        return _split_ssh_target(target)
    except ValueError as exc:
        raise ValueError(f"bad ssh target {shown(target)}: {exc}; {_SSH_EXPECTED}") from None


def check_ssh_target(target: str) -> str:
    split_ssh_target(target)
    return target


class ClusterConfig(_Strict):
    name: str = "cluster"
    interval_s: Annotated[float, Field(gt=0, le=MAX_INTERVAL_S)] = 1.0
    # window over which rates are derived
    window_s: Annotated[float, Field(gt=0, le=MAX_WINDOW_S)] = 10.0
    # how many samples each node keeps (ring buffer); bounds memory over a long session
    history: Annotated[int, Field(ge=2, le=100_000)] = 600
    # GPUs per data-parallel engine, where an engine's page does not say which GPUs it
    # runs on (vLLM): engine k of a node holds GPUs k·tp … k·tp+tp−1; a node's engine may
    # override it (`engine = { …, tensor_parallel_size = 2 }`)
    tensor_parallel_size: Annotated[int, Field(ge=1, le=1024)] | None = None


class SessionConfig(_Strict):
    reservation_start: dt.datetime | None = None
    budget_usd: NonNegFloat | None = None
    # tasks the user counts as acceptable (for $ per acceptable task)
    acceptable_tasks: Annotated[int, Field(ge=0)] | None = None
    # when the reservation ends (or how long it lasts from its start): the spend at the
    # current rate is projected to that instant and set against the budget
    reservation_end: dt.datetime | None = None
    duration_h: Annotated[float, Field(gt=0, le=24 * 366)] | None = None
    # whether the hardware is still billed once the reservation has ended (the provider
    # keeps charging until it is handed back): by default the bill stops at the end
    billed_after_end: bool = False

    @field_validator("reservation_start", "reservation_end")
    @classmethod
    def _aware(cls, value: dt.datetime | None) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("needs a time zone, e.g. 2026-11-29T09:00:00Z")
        return value

    @model_validator(mode="after")
    def _one_end(self) -> SessionConfig:
        if self.reservation_end is not None and self.duration_h is not None:
            raise ValueError("give at most one of reservation_end and duration_h")
        start, end = self.reservation_start, self.reservation_end
        if start is not None and end is not None and end <= start:
            raise ValueError("reservation_end must be after reservation_start")
        return self


class AlertsConfig(_Strict):
    """`[alerts]`: opt-in terminal bell in the TUI (the viewer only decides whether to
    ring; which verdicts are new and which budget threshold is passed come from the
    snapshot). Desktop notifications are not offered: Textual has no public API for them."""

    bell: bool = False  # ring the terminal bell (off unless asked for)
    on: Literal["critical", "warning"] = "critical"  # the least severe verdict that rings
    budget: bool = True  # ring when the budget passes 80 % and 100 %
    min_interval_s: Annotated[float, Field(ge=1.0, le=3600.0)] = 5.0  # at most one ring per


class ApiPriceTable(_Strict):
    """Per 1M tokens. Defaults: DeepSeek-V4.1-Flash (docs/money.md)."""

    model: str = "DeepSeek-V4.1-Flash"
    as_of: str = "2026-11"
    input_cache_hit_offpeak: NonNegFloat = 0.003
    input_cache_hit_peak: NonNegFloat = 0.006
    input_cache_miss_offpeak: NonNegFloat = 0.15
    input_cache_miss_peak: NonNegFloat = 0.30
    output_offpeak: NonNegFloat = 0.60
    output_peak: NonNegFloat = 1.20


class PricingConfig(_Strict):
    mode: Literal["rented", "owned"] = "rented"
    gpu_hour_usd: NonNegFloat | None = None
    node_hour_usd: NonNegFloat | None = None
    extras_hour_usd: NonNegFloat = 0.0
    # owned hardware
    hardware_hour_usd: NonNegFloat = 0.0  # amortised, whole cluster
    host_base_power_w: NonNegFloat = 0.0  # per node, beyond the GPUs' measured power
    pue: Annotated[float, Field(ge=1.0, le=5.0)] = 1.0
    kwh_usd: NonNegFloat = 0.0
    api: ApiPriceTable = ApiPriceTable()


class Thresholds(_Strict):
    idle_util_pct: Annotated[float, Field(ge=0, le=100)] = 5.0
    hold_s: NonNegFloat = 10.0  # a verdict appears only after its condition held this long
    clear_s: NonNegFloat = 10.0  # …and clears only after it has been false this long
    # preemptions per second on one node from which a burst is marked on the timeline
    preemption_burst_per_s: NonNegFloat = 1.0
    idle_hold_s: NonNegFloat = 30.0
    straggler_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.8  # below 80 % of role median
    link_rate_ratio: Annotated[float, Field(gt=0, le=1)] = 0.95  # negotiated < 95 % expected
    link_busy_ratio: Annotated[float, Field(gt=0, le=1)] = 0.9  # "near line rate"
    link_pile_share: Annotated[float, Field(gt=0.5, le=1)] = 0.8  # one port carries 80 %+
    gpu_wait_util_pct: Annotated[float, Field(ge=0, le=100)] = 50.0
    # "busy but waiting": util at least this while SM activity (GPM / DCGM profiling) is
    # below waiting_activity_pct — a kernel resident and spinning, not working
    busy_util_pct: Annotated[float, Field(ge=0, le=100)] = 80.0
    waiting_activity_pct: Annotated[float, Field(ge=0, le=100)] = 10.0
    # a pile-up needs real traffic: a few kB/s of chatter on one port is not a pile
    link_pile_min_gbps: NonNegFloat = 1.0
    # port_xmit_wait above this rate counts as "rising" (IB ticks per second)
    link_xmit_wait_per_s: NonNegFloat = 0.0
    # RoCE congestion evidence: pause frames (received + sent) and congestion notifications
    # (sent + handled) per second on one port above these count as "rising"
    link_pause_per_s: NonNegFloat = 10.0
    link_cnp_per_s: NonNegFloat = 10.0
    # `congested`: a port's congestion figure counts only above this × the median of the
    # same figure on its role peers' ports (the fabric's baseline), besides the floors above
    congestion_ratio: Annotated[float, Field(gt=1)] = 4.0
    # SwPowerCap alone is how a busy GPU normally runs (at its power limit): count it as
    # throttling only when asked, or every busy node of a real cluster reads "throttled"
    throttle_on_power_cap: bool = False
    # a median of fewer role nodes than this is too thin to call anyone a straggler
    straggler_min_nodes: Annotated[int, Field(ge=3)] = 3
    # acceptance-drop: draft acceptance under this share of its pool's median (same role,
    # drafting method and draft length) or of its own last hour's (docs/verdicts.md)
    acceptance_drop_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.8
    # a node drafting fewer tokens than this per second is not judged (too few to mean much)
    acceptance_min_draft_tokens_per_s: NonNegFloat = 1.0
    # its own level counts once its history covers this long, over at most the span
    acceptance_own_min_s: NonNegFloat = 300.0
    acceptance_own_span_s: Annotated[float, Field(gt=0, le=86400)] = 3600.0
    stale_intervals: PositiveFloat = 2.0
    unreachable_intervals: PositiveFloat = 5.0
    # an engine log with no parsed line for this long while the GPUs are busy gets a note
    log_silent_s: PositiveFloat = 60.0
    # coverage gaps acknowledged as known ("clock_events", "nvlink", "ports", …): they stay
    # listed on the node (screen, snapshot) but no longer raise the blind verdict
    blind_ignore: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.unreachable_intervals <= self.stale_intervals:
            raise ValueError("unreachable_intervals must be greater than stale_intervals")
        return self


class NicExpectation(_Strict):
    name: str = Field(min_length=1)
    expected_gbps: PositiveFloat | None = None
    kind: Literal["ethernet", "infiniband", "roce", "bond"] | None = None


class EngineConfig(_Strict):
    url: str | None = None
    profile: str = "vllm"
    # GPUs per DP engine on this node (overrides [cluster] tensor_parallel_size)
    tensor_parallel_size: Annotated[int, Field(ge=1, le=1024)] | None = None
    # fetch the endpoint from the node's own side (through the probe) rather than directly
    via_probe: bool | None = None
    log: PathStr | None = None  # a log file on the node, followed read-only
    # or a command whose output is the log (argv, never a shell), e.g. journalctl -u x -f
    log_command: Annotated[list[ArgStr], Field(min_length=1, max_length=64)] | None = None
    # pattern set(s) for the log: built in "vllm", "sglang", "deepinfer-offline", or [log_patterns.NAME]
    log_patterns: str | list[str] | None = None
    # the engine's stats interval (vLLM --log-stats-interval); learnt from the log if unset
    log_interval_s: PositiveFloat | None = None
    # SGLang's --decode-log-interval: decode passes per "Decode batch" line (40 if unset)
    log_decode_passes: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    # read `log` even when it resolves (through symlinks) outside its own directory; off,
    # because the reader is often root and the log directory the engine user's
    log_follow_symlink_out: bool = False

    @model_validator(mode="after")
    def _one_log(self) -> EngineConfig:
        if self.log is not None and self.log_command is not None:
            raise ValueError("give log or log_command, not both")
        if self.log_follow_symlink_out and self.log is None:
            raise ValueError("log_follow_symlink_out applies to a log file: give log")
        return self

    @property
    def log_pattern_sets(self) -> list[str]:
        if self.log_patterns is None:
            return ["vllm"]
        return [self.log_patterns] if isinstance(self.log_patterns, str) else list(self.log_patterns)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)


LogPatternKind = Literal["counter", "count", "rate", "gauge"]
assert set(LOG_PATTERN_KINDS) == {"counter", "count", "rate", "gauge"}


class LogPattern(_Strict):
    """One user log pattern (`[[log_patterns.NAME]]`): a regex whose named groups are
    canonical quantities. `kind`: counter (a running total as printed), count (per line,
    accumulated), rate (per second over the log interval), gauge. With `field` set the
    value is the group named after it, else the group `value`, else the only group."""

    regex: str = Field(min_length=1, max_length=2000)
    field: str | None = None
    kind: LogPatternKind = "count"
    scale: PositiveFloat = 1.0

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"regex does not compile: {exc}") from None
        return value

    @field_validator("field")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None and value not in LOG_QUANTITIES:
            raise ValueError(f"{value!r} is not a canonical quantity ({', '.join(LOG_QUANTITIES)})")
        return value

    @model_validator(mode="after")
    def _groups(self) -> LogPattern:
        compiled = re.compile(self.regex)
        named = set(compiled.groupindex)
        if self.field is None:
            if not named & set(LOG_QUANTITIES):
                raise ValueError("no named group is a canonical quantity, and no field is given")
        elif self.field not in named and "value" not in named and compiled.groups != 1:
            raise ValueError(f"name the group holding {self.field!r} (?P<{self.field}>…) or (?P<value>…)")
        return self


class SshOptions(_Strict):
    # Turning host-key checking off must be explicit; the TUI shows it on screen.
    insecure_no_host_key_check: bool = False
    known_hosts: PathStr | None = None  # default: ~/.ssh/known_hosts (or the config's)
    # an ssh_config file (default: ~/.ssh/config); it can run commands (ProxyCommand,
    # Match exec), so it must be the user's own, writable by no one else (collectors/sources/ssh.py)
    config: PathStr | None = None
    identity_files: list[PathStr] = Field(default_factory=list)  # default: config / ~/.ssh/id_*
    # the node's interpreter for the probe
    python: Annotated[str, AfterValidator(_check_interpreter)] = "python3"
    connect_timeout_s: PositiveFloat = 10.0
    keepalive_s: PositiveFloat = 5.0
    # handshakes cost client CPU and sshd drops unauthenticated connections past
    # MaxStartups (10 by default, matters behind one ProxyJump host): bound them
    max_concurrent_handshakes: Annotated[int, Field(ge=1, le=1024)] = 16
    backoff_cap_s: PositiveFloat = 30.0  # reconnect delays grow up to this


class NodeConfig(_Strict):
    """One node, or a range of nodes when `hosts` holds a pattern like ``decode-[01-16]``.

    In a range, ``{host}`` inside `ssh`, `metrics` and `engine.url` is replaced by each
    expanded name (a plain text substitution, never a shell).
    """

    name: str | None = None
    hosts: str | None = None
    role: Role = "mixed"
    gpus: Annotated[int, Field(ge=0, le=1024)] | None = None
    accelerator: Literal["gpu", "npu"] = "gpu"
    local: bool = False  # read this node from the machine infertop runs on
    ssh: str | None = None
    metrics: list[str] = Field(default_factory=list)
    engine: EngineConfig | None = None
    nics: list[NicExpectation] = Field(default_factory=list)
    gpu_hour_usd: NonNegFloat | None = None
    node_hour_usd: NonNegFloat | None = None
    # how the operator groups nodes within a pool (a rack, a leaf switch, a unit); a
    # `hosts` range is its own group unless it names one. The fleet map groups by it
    group: str | None = None

    @field_validator("group")
    @classmethod
    def _group(cls, value: str | None) -> str | None:
        return None if value is None else _plain_label(value)

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, urls: list[str]) -> list[str]:
        return [check_http_url(u.replace("{host}", "host")) and u for u in urls]

    @field_validator("ssh")
    @classmethod
    def _ssh(cls, value: str | None) -> str | None:
        return None if value is None else check_ssh_target(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,128}", value):
            raise ValueError(f"node name {value!r} may hold only letters, digits and _.:@-")
        return value

    @model_validator(mode="after")
    def _one_name(self) -> NodeConfig:
        if (self.name is None) == (self.hosts is None):
            raise ValueError("give exactly one of name or hosts")
        return self


_PROM_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# label matchers only (`a="x", b=~"y.*"`): no `}` or PromQL from the layout
_PROM_MATCHER = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*'
_PROM_SELECTOR = re.compile(rf"(?:{_PROM_MATCHER})(?:,{_PROM_MATCHER})*,?\s*")


def _check_labels(value: str | list[str]) -> None:
    for label in [value] if isinstance(value, str) else value:
        if not _PROM_LABEL.fullmatch(label):
            raise ValueError(f"{label!r} is not a Prometheus label name")


class PrometheusConfig(_Strict):
    # one PromQL endpoint, or several (one per shard or pool, a global layer): queried
    # concurrently, their answers merged by node
    url: str | list[str]
    # the label naming a node; a list = first present wins (e.g. ["Hostname", "instance"])
    node_label: str | list[str] = "instance"
    strip_port: bool = True  # "decode-01:9400" → "decode-01"
    selector: str | None = None  # extra matchers on every query, e.g. 'cluster="trial-7"'
    token_env: EnvName | None = None
    token_file: PathStr | None = None
    header_env: EnvName | None = None  # a raw header value (e.g. "Basic …") in an env var
    header_name: Annotated[str, AfterValidator(_check_header_name)] = "Authorization"
    verify_tls: bool = True
    ca_file: PathStr | None = None
    timeout_s: PositiveFloat = 5.0
    discover: bool = False  # find nodes from Prometheus instead of listing them
    discover_role: Role = "mixed"
    backfill_s: NonNegFloat = 300.0  # history pulled by range queries on start (0 = none)
    # refresh per-GPU series every N ticks (None: automatic, by cluster size)
    gpu_detail_every: Annotated[int, Field(ge=1, le=1000)] | None = None
    # labels in which copies of one series differ (HA replicas, a second job scraping the
    # same targets): copies are collapsed into one, as Thanos' --query.replica-label does
    replica_label: str | list[str] = Field(default_factory=list)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            if not value:
                raise ValueError("give at least one url")
            checked = [check_http_url(u) for u in value]
            if len({u.rstrip("/") for u in checked}) != len(checked):
                raise ValueError("a url is listed twice")
            return checked
        return check_http_url(value)

    @property
    def urls(self) -> list[str]:
        return self.url if isinstance(self.url, list) else [self.url]

    @field_validator("node_label")
    @classmethod
    def _labels(cls, value: str | list[str]) -> str | list[str]:
        _check_labels(value)
        if isinstance(value, list) and not value:
            raise ValueError("give at least one label")
        return value

    @field_validator("replica_label")
    @classmethod
    def _replica_labels(cls, value: str | list[str]) -> str | list[str]:
        _check_labels(value)
        return value

    @property
    def replica_labels(self) -> tuple[str, ...]:
        return (self.replica_label,) if isinstance(self.replica_label, str) else tuple(self.replica_label)

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not _PROM_SELECTOR.fullmatch(value):
            raise ValueError(f'expected label matchers like cluster="trial", job=~"vllm.*" (got {value!r})')
        return value.strip().rstrip(",")

    @model_validator(mode="after")
    def _one_secret(self) -> PrometheusConfig:
        given = [n for n in ("token_env", "token_file", "header_env") if getattr(self, n)]
        if len(given) > 1:
            raise ValueError(
                f"give at most one of token_env, token_file, header_env (got {', '.join(given)})"
            )
        return self


class SloConfig(_Strict):
    """Latency targets ([slo]): the share of requests within each, and an `slo` verdict
    on a node whose p99 over the window is past it."""

    ttft_p99_s: PositiveFloat | None = None
    itl_p99_s: PositiveFloat | None = None


def _plain_label(value: str) -> str:
    if not value.strip() or _CONTROL_CHARS.search(value):
        raise ValueError(f"{shown(value)} is not a label (no control characters, not empty)")
    return value


class ReferencePoint(_Strict):
    """A published throughput / interactivity point to set the live decode point beside."""

    label: Annotated[str, Field(max_length=60), AfterValidator(_plain_label)]
    output_tokens_per_s_per_gpu: PositiveFloat
    output_tokens_per_s_per_user: PositiveFloat
    # how the publisher counted tokens: DeepSeek counts every drafted token as if accepted
    accounting: Literal["full-acceptance", "accepted"] = "full-acceptance"


class ScoreboardConfig(_Strict):
    """[scoreboard]: reference points that replace the bundled, dated table."""

    reference_points: list[ReferencePoint] | None = None
    reference_source: Annotated[str, Field(max_length=200), AfterValidator(_plain_label)] | None = None


class Layout(_Strict):
    cluster: ClusterConfig = ClusterConfig()
    session: SessionConfig = SessionConfig()
    pricing: PricingConfig = PricingConfig()
    thresholds: Thresholds = Thresholds()
    alerts: AlertsConfig = AlertsConfig()
    prometheus: PrometheusConfig | None = None
    ssh: SshOptions = SshOptions()
    nodes: list[NodeConfig] = Field(default_factory=list)
    # custom engine profiles: profile name → canonical field → metric name(s)
    profiles: dict[str, dict[str, str | list[str]]] = Field(default_factory=dict)
    # user log pattern sets: name → patterns ([[log_patterns.NAME]] tables)
    log_patterns: dict[str, list[LogPattern]] = Field(default_factory=dict)
    slo: SloConfig = SloConfig()
    scoreboard: ScoreboardConfig = ScoreboardConfig()
    # where this layout was read from (set by the loader, not the file)
    source_path: str | None = None

    @model_validator(mode="after")
    def _unique(self) -> Layout:
        seen: set[str] = set()
        for node in self.nodes:
            if node.name is None:
                raise ValueError("node ranges must be expanded before validation")
            if node.name in seen:
                raise ValueError(f"duplicate node name {node.name!r}")
            seen.add(node.name)
        return self

    @model_validator(mode="after")
    def _log_sets_exist(self) -> Layout:
        known = set(BUILTIN_PATTERN_SETS) | set(self.log_patterns)
        for i, node in enumerate(self.nodes):
            for name in node.engine.log_pattern_sets if node.engine else ():
                if name not in known:
                    raise ValueError(
                        f"nodes[{i}].engine.log_patterns: unknown pattern set {name!r} "
                        f"(known: {', '.join(sorted(known))})"
                    )
        return self

    def node(self, name: str) -> NodeConfig:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)
