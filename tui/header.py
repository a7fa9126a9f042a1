"""The header: cluster name, session clock, running spend, $/h, and loud warnings."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from monitor.format import fmt_duration, fmt_usd
from monitor.snapshot import Snapshot
from tui.columns import TROUBLE, WARN
from tui.text import inert

INSECURE_SSH_WARNING = "⚠ SSH host-key checking is OFF for this layout (ssh.insecure_no_host_key_check)"


def header_text(
    snapshot: Snapshot | None,
    *,
    paused: bool = False,
    filter_text: str = "",
    shown: int | None = None,
    sort_label: str = "layout",
) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("infertop", "bold")
    if snapshot is None:
        out.append("  waiting for the first samples…", "grey50")
        return out
    s = snapshot.session
    out.append(" ▸ ")
    out.append(inert(snapshot.cluster.name, "bold", max_len=40))
    out.append("   session ")
    out.append(fmt_duration(s.elapsed_s), "bold")
    out.append("   spend ")
    out.append(fmt_usd(s.spend_usd), "bold")
    out.append(f"   {fmt_usd(s.cost_per_hour_usd)}/h")
    if s.idle_spend_usd:
        out.append(f"   idle {fmt_usd(s.idle_spend_usd)}")
    out.append(f"   phase {inert(s.phase, max_len=16).plain}")
    if s.budget_usd is not None:
        style = {"100%": TROUBLE, "80%": WARN}.get(s.budget_alert or "", "")
        out.append(f"   budget {s.budget_label or fmt_usd(s.budget_usd, 0)}", style)
    total = len(snapshot.nodes)
    out.append(f"   nodes {shown if shown is not None else total}/{total}", "grey70")
    if filter_text:
        out.append("   filter ", "grey70")
        out.append(inert(filter_text, max_len=40).plain, "bold cyan")
    out.append(f"   sort {sort_label}", "grey70")
    if paused:
        out.append("   ")
        out.append(" PAUSED ", "reverse yellow")
    if snapshot.cluster.insecure_ssh:
        out.append("\n")
        out.append(INSECURE_SSH_WARNING, TROUBLE)
    return out


class HeaderBar(Static):
    DEFAULT_CSS = """
    HeaderBar { height: auto; padding: 0 1; }
    """

    _lines: int | None = None  # lines shown (the text never wraps: no_wrap)

    def show(self, snapshot: Snapshot | None, **kwargs: object) -> None:
        text = header_text(snapshot, **kwargs)  # type: ignore[arg-type]
        lines = text.plain.count("\n") + 1
        # a layout of the whole screen only when the header's height changes, not every
        # frame: at 128 nodes a layout pass costs several ms
        self.update(text, layout=lines != self._lines)
        self._lines = lines
