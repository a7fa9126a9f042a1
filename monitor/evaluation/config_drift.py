"""Config drift: a node whose engine settings differ from its role pool's majority. Pure.

The settings are the engines' info gauges (`EngineView.settings`). Within each role
pool, a setting's majority value is the one held by more than half of the answering
nodes that report the setting; a node holding another value has drifted in that setting.
A pool with no strict majority (two nodes that disagree) names no one: which of them is
odd cannot be told. A node that does not report a setting is unknown there, not drifted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from infertop.monitor.evaluation.conditions import CONFIG_DRIFT, Condition
from infertop.monitor.snapshot import ConfigDriftView, NodeView

MAX_NAMED = 3  # settings named in the verdict's line; the node screen lists them all


def _settings(node: NodeView) -> dict[str, str] | None:
    if node.status != "ok" or node.engine is None:
        return None
    return node.engine.settings


def pool_drift(nodes: Sequence[NodeView]) -> dict[str, list[ConfigDriftView]]:
    """Node name → the settings in which it differs from its pool's majority."""
    by_role: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for node in nodes:
        settings = _settings(node)
        if settings:
            by_role.setdefault(node.role, []).append((node.name, settings))
    out: dict[str, list[ConfigDriftView]] = {}
    for members in by_role.values():
        keys = sorted({k for _, settings in members for k in settings})
        for key in keys:
            values = Counter(s[key] for _, s in members if key in s)
            reporting = sum(values.values())
            majority, agreeing = values.most_common(1)[0]
            if len(values) < 2 or agreeing * 2 <= reporting:
                continue
            for name, settings in members:
                value = settings.get(key)
                if value is not None and value != majority:
                    out.setdefault(name, []).append(ConfigDriftView(
                        setting=key, value=value, pool_value=majority,
                        pool_agreeing=agreeing, pool_reporting=reporting,
                    ))
    return out


def with_config_drift(nodes: Sequence[NodeView]) -> list[NodeView]:
    """`nodes` with `config_drift` filled in (an empty list where none)."""
    drift = pool_drift(nodes)
    return [n.model_copy(update={"config_drift": drift[n.name]}) if n.name in drift else n for n in nodes]


def drift_line(d: ConfigDriftView) -> str:
    return f"{d.setting} {d.value}, pool {d.pool_value} ({d.pool_agreeing} of {d.pool_reporting} nodes)"


def config_drift_condition(node: NodeView) -> Condition | None:
    """The node's engine settings differ from its pool's: one line naming each setting
    (the first few) and both values."""
    if not node.config_drift:
        return None
    named = "; ".join(drift_line(d) for d in node.config_drift[:MAX_NAMED])
    more = len(node.config_drift) - MAX_NAMED
    tail = f"; +{more} more" if more > 0 else ""
    return Condition(CONFIG_DRIFT, f"settings differ from the {node.role} pool: {named}{tail}", "warning")
