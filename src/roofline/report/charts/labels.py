"""Labels on static charts that never overlap: greedy placement on rings around each anchor.

Used by the roofline chart (kernel numbers) and the roofs comparison (ridge values); a label's
box avoids every other label, every marker and every obstacle box, and stays inside the axes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox


P = ParamSpec("P")
R = TypeVar("R")


def literal_text(draw: Callable[P, R]) -> Callable[P, R]:
    """Run a chart function with matplotlib's mathtext off (`text.parse_math`): every text it draws is
    literal. Our own labels use no mathtext, and a name from a user's file (a kernel, a machine, a
    config folder or a file named `a$\\frac{$b`) would otherwise be parsed as TeX: an error, or `$x$`
    silently drawn as an italic x. Texts read the setting when made, so the whole figure is built, and
    rendered, inside the context."""
    @functools.wraps(draw)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return wrapped


def _overlaps(a: Bbox, boxes: Sequence[Bbox]) -> bool:
    return any(a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1 for b in boxes)


def _text_size_px(fig: Figure, text: str, fontsize: float, pad_px: float) -> tuple[float, float]:
    from matplotlib.text import Text

    t = Text(0, 0, text, fontsize=fontsize, fontweight="bold", figure=fig)
    bb = t.get_window_extent(fig.canvas.get_renderer())  # type: ignore[attr-defined]
    return bb.width + 2 * pad_px, bb.height + 2 * pad_px


def place_labels(fig: Figure, ax: Axes, anchors: Sequence[tuple[float, float]], texts: Sequence[str],
                 colours: Sequence[str], obstacles: Sequence[Bbox], gid_prefix: str = "label",
                 fontsize: float = 8.0) -> list[Any]:
    """Put each text near its anchor (data coordinates) where its box overlaps no other label, no
    marker and no obstacle, and stays inside the axes; a thin leader line joins label and point.

    Greedy: candidates on rings of growing radius around the anchor, tried in a fixed order (upper
    right first). Label sizes are measured once and the candidate boxes computed, so a hundred
    labels take milliseconds. If no candidate is free (never seen in practice), the one with the
    fewest overlaps is used."""
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    ax_box = ax.get_window_extent(renderer)
    px_per_pt = fig.dpi / 72.0
    pad_px = 2.0 * px_per_pt
    display: list[tuple[float, float]] = [tuple(d) for d in ax.transData.transform(list(anchors))] if anchors else []
    marker_r = 4.5 * px_per_pt
    taken: list[Bbox] = list(obstacles)
    taken += [Bbox.from_extents(x - marker_r, y - marker_r, x + marker_r, y + marker_r) for x, y in display]
    angles = [45, 135, -45, -135, 90, -90, 0, 180, 22, 158, -22, -158, 68, 112, -68, -112]
    radii_pt = [11, 17, 25, 35, 48, 64, 84, 108]
    out = []
    for i, ((px, py), text) in enumerate(zip(display, texts, strict=True)):
        w, h = _text_size_px(fig, text, fontsize, pad_px)
        best: tuple[int, float, float] | None = None
        for r in radii_pt:
            for a in angles:
                dx = r * math.cos(math.radians(a)) * px_per_pt
                dy = r * math.sin(math.radians(a)) * px_per_pt
                # push the box's near edge, not its centre, to the ring
                cx = px + dx + math.copysign(w / 2, dx) * (abs(dx) > 1e-6)
                cy = py + dy + math.copysign(h / 2, dy) * (abs(dy) > 1e-6)
                box = Bbox.from_extents(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                inside = (box.x0 >= ax_box.x0 and box.x1 <= ax_box.x1 and box.y0 >= ax_box.y0
                          and box.y1 <= ax_box.y1)
                hits = sum(1 for b in taken if _overlaps(box, [b])) + (0 if inside else 100)
                if best is None or hits < best[0]:
                    best = (hits, cx, cy)
                if hits == 0:
                    break
            if best is not None and best[0] == 0:
                break
        assert best is not None
        _, cx, cy = best
        taken.append(Bbox.from_extents(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
        off = ((cx - px) / px_per_pt, (cy - py) / px_per_pt)
        ann = ax.annotate(text, xy=anchors[i], xytext=off, textcoords="offset points", ha="center", va="center",
                          fontsize=fontsize, fontweight="bold", color="black", zorder=6,
                          bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": colours[i], "lw": 0.8},
                          arrowprops={"arrowstyle": "-", "lw": 0.6, "color": "0.35", "shrinkA": 0, "shrinkB": 3},
                          gid=f"{gid_prefix}-{i + 1}")
        out.append(ann)
    return out


def text_box(fig: Figure, artist: Any) -> Bbox:
    """The artist's box in display pixels: an obstacle for `place_labels`."""
    box: Bbox = artist.get_window_extent(fig.canvas.get_renderer())  # type: ignore[attr-defined]
    return box


def number_ranges(ids: Sequence[int]) -> str:
    """[1, 2, 3, 5, 7, 8] -> '1–3,5,7,8': runs of three or more collapse to a range."""
    parts: list[str] = []
    run: list[int] = []
    for n in [*ids, None]:
        if n is not None and run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            parts.append(f"{run[0]}–{run[-1]}" if len(run) >= 3 else ",".join(map(str, run)))
        run = [n] if n is not None else []
    return ",".join(parts)


def shorten(name: str, width: int = 34) -> str:
    """The name cut to `width` characters, an ellipsis marking the cut."""
    return name if len(name) <= width else name[: width - 1] + "…"
