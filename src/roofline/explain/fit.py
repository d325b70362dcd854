"""The words for a memory fit, shared by `roofline model`'s text and its --explain derivation (a module of
its own: the text of every run needs these two lines, not the derivations of roofline.explain.model)."""

from __future__ import annotations

from roofline.units import format_bytes

TIGHT_HEADROOM = 0.05  # a fit that leaves less than 5% of the usable memory free is "tight"


def fit_words(total_bytes: float, usable_bytes: float) -> str:
    """'fits, 35.6 GiB (49%) headroom'; under TIGHT_HEADROOM of the usable memory left (usable − needed),
    'fits, tight (<5% headroom): 0.8 GiB (0.6%) left': a longer context or a larger batch will not."""
    room = usable_bytes - total_bytes
    share = room / usable_bytes if usable_bytes else 0.0
    if share < TIGHT_HEADROOM:
        return f"fits, tight (<{TIGHT_HEADROOM:.0%} headroom): {format_bytes(room, binary=True)} ({share:.1%}) left"
    return f"fits, {format_bytes(room, binary=True)} ({share:.0%}) headroom"


__all__ = ["TIGHT_HEADROOM", "fit_words"]
