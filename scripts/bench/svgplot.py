"""Small SVG charts for scripts/bench/report (standard library only): a line chart and a grouped
bar chart, with axes, ticks and a legend. Output is deterministic for the same input."""

import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 720, 400
LEFT, RIGHT, TOP, BOTTOM = 90, 150, 40, 60
COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def _nice_ticks(top, count=5):
    if top <= 0:
        return [0, 1]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(math.ceil(top / step)) + 1)]


def _label(v):
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


class _Canvas:
    def __init__(self, title, xlabel, ylabel):
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'font-family="sans-serif" font-size="12">',
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
            f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">'
            f"{escape(title)}</text>",
            f'<text x="{LEFT + self.plot_w() / 2}" y="{HEIGHT - 15}" text-anchor="middle">'
            f"{escape(xlabel)}</text>",
            f'<text x="18" y="{TOP + self.plot_h() / 2}" text-anchor="middle" '
            f'transform="rotate(-90 18 {TOP + self.plot_h() / 2})">{escape(ylabel)}</text>',
        ]

    @staticmethod
    def plot_w():
        return WIDTH - LEFT - RIGHT

    @staticmethod
    def plot_h():
        return HEIGHT - TOP - BOTTOM

    def add(self, element):
        self.parts.append(element)

    def y_axis(self, ticks, to_y):
        for t in ticks:
            y = to_y(t)
            self.add(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + self.plot_w()}" y2="{y:.1f}" '
                     f'stroke="#ddd"/>')
            self.add(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(t)}</text>')
        self.add(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + self.plot_h()}" '
                 f'stroke="black"/>')
        self.add(f'<line x1="{LEFT}" y1="{TOP + self.plot_h()}" x2="{LEFT + self.plot_w()}" '
                 f'y2="{TOP + self.plot_h()}" stroke="black"/>')

    def legend(self, names):
        for i, name in enumerate(names):
            x, y = WIDTH - RIGHT + 15, TOP + 10 + i * 20
            self.add(f'<rect x="{x}" y="{y - 9}" width="12" height="12" '
                     f'fill="{COLORS[i % len(COLORS)]}"/>')
            self.add(f'<text x="{x + 18}" y="{y + 1}">{escape(name)}</text>')

    def save(self, path):
        self.add("</svg>")
        path.write_text("\n".join(self.parts) + "\n")


def lines(path, series, title, xlabel, ylabel):
    """series: {name: [(x, y), ...]} drawn as lines with markers on linear axes."""
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts if y is not None]
    c = _Canvas(title, xlabel, ylabel)
    xticks, yticks = _nice_ticks(max(xs, default=1)), _nice_ticks(max(ys, default=1))

    def to_x(v):
        return LEFT + c.plot_w() * v / xticks[-1]

    def to_y(v):
        return TOP + c.plot_h() * (1 - v / yticks[-1])

    c.y_axis(yticks, to_y)
    for t in xticks:
        c.add(f'<text x="{to_x(t):.1f}" y="{TOP + c.plot_h() + 18}" text-anchor="middle">'
              f"{_label(t)}</text>")
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        pts = [(x, y) for x, y in pts if y is not None]
        coords = " ".join(f"{to_x(x):.1f},{to_y(y):.1f}" for x, y in pts)
        c.add(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in pts:
            c.add(f'<circle cx="{to_x(x):.1f}" cy="{to_y(y):.1f}" r="3" fill="{color}"/>')
    c.legend(list(series))
    c.save(path)


def bars(path, groups, title, ylabel, log=False):
    """groups: {series name: [(category, value), ...]}: one cluster per category, one bar per
    series; log=True uses a log10 value axis."""
    names = list(groups)
    categories = []
    for pts in groups.values():
        for cat, _ in pts:
            if cat not in categories:
                categories.append(cat)
    values = [v for pts in groups.values() for _, v in pts if v]
    c = _Canvas(title, "", ylabel)
    if log:
        lo = 10 ** math.floor(math.log10(min(values, default=1)))
        hi = 10 ** math.ceil(math.log10(max(values, default=10)))
        hi = hi if hi > lo else lo * 10
        ticks = [10 ** e for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1)]

        def to_y(v):
            v = max(v, lo)
            return TOP + c.plot_h() * (1 - (math.log10(v) - math.log10(lo))
                                       / (math.log10(hi) - math.log10(lo)))
    else:
        ticks = _nice_ticks(max(values, default=1))

        def to_y(v):
            return TOP + c.plot_h() * (1 - v / ticks[-1])
    c.y_axis(ticks, to_y)
    slot = c.plot_w() / max(len(categories), 1)
    bar_w = slot * 0.8 / max(len(names), 1)
    for ci, cat in enumerate(categories):
        x0 = LEFT + ci * slot + slot * 0.1
        c.add(f'<text x="{LEFT + ci * slot + slot / 2:.1f}" y="{TOP + c.plot_h() + 18}" '
              f'text-anchor="middle">{escape(str(cat))}</text>')
        for si, name in enumerate(names):
            value = dict(groups[name]).get(cat)
            if not value:
                continue
            y = to_y(value)
            c.add(f'<rect x="{x0 + si * bar_w:.1f}" y="{y:.1f}" width="{bar_w * 0.9:.1f}" '
                  f'height="{TOP + c.plot_h() - y:.1f}" fill="{COLORS[si % len(COLORS)]}">'
                  f"<title>{escape(name)} {escape(str(cat))}: {value:g}</title></rect>")
    c.legend(names)
    c.save(path)
