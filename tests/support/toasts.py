"""The notifications (toasts) an app under test has put on screen, told through Textual's
public API: every `notify()` call, minus those a `clear_notifications()` took away.

Mix `ToastsShown` in before the app class (`class SeenApp(ToastsShown, InfertopApp)`); read
`app.toasts`. A toast's own timeout is left out on purpose: a loaded machine must not make
a toast vanish before the test reads it.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from textual.notifications import Notification, SeverityLevel


class ToastsShown:
    NOTIFICATION_TIMEOUT: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.toasts: list[Notification] = []

    def notify(
        self, message: str, *, title: str = "", severity: SeverityLevel = "information",
        timeout: float | None = None, markup: bool = True,
    ) -> None:
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)  # type: ignore[misc]
        shown_s = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        self.toasts.append(Notification(message, title, severity, shown_s, markup=markup))

    def clear_notifications(self) -> None:
        super().clear_notifications()  # type: ignore[misc]
        self.toasts.clear()


def css_beside(app_class: type) -> list[str]:
    """An app class's CSS_PATH as absolute paths, for a subclass defined in another folder
    (Textual reads a relative CSS_PATH beside the file of the class that is run)."""
    paths = app_class.CSS_PATH
    where = Path(inspect.getfile(app_class)).parent
    return [str(where / path) for path in ([paths] if isinstance(paths, str | Path) else paths or [])]
