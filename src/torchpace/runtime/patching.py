"""Replace attributes for the length of a run and put every original back afterwards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Patches:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool]] = []
        self._undo: list[Callable[[], object]] = []

    def set(self, owner: Any, name: str, value: Any) -> Any:
        """Set ``owner.name = value``; return the original."""
        own = name in vars(owner) if isinstance(owner, type) else hasattr(owner, name)
        original = getattr(owner, name)
        self._saved.append((owner, name, vars(owner).get(name) if own else None, own))
        setattr(owner, name, value)
        return original

    def on_undo(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` at undo time: removing a hook handle, for instance."""
        self._undo.append(fn)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()
        while self._saved:
            owner, name, original, own = self._saved.pop()
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
