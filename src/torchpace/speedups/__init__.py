"""Speed-up verbs: one per catalogue technique, object first, keyword-only options.

Each verb returns what it changed (an ``Applied`` record, or the object it builds) and is a
no-op with a ``SpeedupWarning`` where the device or torch version cannot do it. Importing this
package imports torch; ``import torchpace`` does not import this package.
"""

from __future__ import annotations

from torchpace.speedups.applied import Applied, SpeedupWarning

__all__ = ["Applied", "SpeedupWarning"]
