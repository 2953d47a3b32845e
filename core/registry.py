"""What apps contribute to a layer below them, in one pattern.

A lower layer that *uses* contributions from the apps above it (the tools the model is
offered, the outbox's channels, the sweep's jobs, the templates of action blocks) keeps them in
a `Registry`; apps add theirs from `AppConfig.ready()`. A lower layer that only *announces*
that something happened (a question changed, a member's access changed, jobs are due) sends a
Django signal instead, and the apps above connect receivers. docs/developers/architecture.md,
"Extension points", lists both.

A registry keeps insertion order; adding under a key that is there already replaces the value
in its place. Without a key, the value is its own key (a list of distinct callables).
"""

from collections.abc import Hashable, Iterator
from contextlib import contextmanager


class Registry[V]:
    def __init__(self, what: str) -> None:
        # What it holds, for messages and repr ("tools", "outbox channels").
        self.what = what
        self._items: dict[Hashable, V] = {}

    def __repr__(self) -> str:
        return f"<Registry of {self.what}: {len(self._items)}>"

    def add(self, value: V, *, key: Hashable | None = None) -> V:
        """Add `value` under `key` (itself if None); returns `value`, so it can decorate."""
        self._items[value if key is None else key] = value
        return value

    def remove(self, key: Hashable) -> None:
        """Remove what is under `key`, if anything is."""
        self._items.pop(key, None)

    def get(self, key: Hashable) -> V | None:
        return self._items.get(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[V]:
        """The values in the order they were added (a copy: adding while iterating is safe)."""
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    @contextmanager
    def added(self, value: V, *, key: Hashable | None = None) -> Iterator[V]:
        """Add `value` for the duration of a `with` block, then put back what was there."""
        key = value if key is None else key
        missing = object()
        before = self._items.get(key, missing)
        self._items[key] = value
        try:
            yield value
        finally:
            if before is missing:
                self._items.pop(key, None)
            else:
                self._items[key] = before
