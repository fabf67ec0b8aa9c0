// A line chart in SVG, drawn by hand: time on x, values on y from 0, one polyline a series.

import { h, fmt } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';
const W = 600;
const H = 160;
const PAD = { left: 46, right: 8, top: 8, bottom: 18 };

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, value);
  if (text !== undefined) el.textContent = text;
  return el;
}

/** A time of day; with seconds when the chart spans less than ten minutes. */
function clock(t, span) {
  const seconds = span < 600000 ? { second: '2-digit' } : {};
  return new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', ...seconds });
}

/** `series`: [{name, points: [[t ms, value]]}]; the chart spans their common time range. */
export function lineChart(title, series, unit = '') {
  const all = series.flatMap((s) => s.points);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img' });
  root.append(svg('title', {}, title));
  const x0 = PAD.left;
  const x1 = W - PAD.right;
  const y0 = H - PAD.bottom;
  const y1 = PAD.top;
  root.append(svg('line', { class: 'axis', x1: x0, y1: y0, x2: x1, y2: y0 }));
  root.append(svg('line', { class: 'axis', x1: x0, y1, x2: x1, y2: y1 }));
  if (all.length === 0) {
    root.append(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' }, 'no samples yet'));
  } else {
    const tMin = Math.min(...all.map((p) => p[0]));
    const tMax = Math.max(...all.map((p) => p[0]), tMin + 1);
    const vMax = Math.max(...all.map((p) => p[1]), 1) * 1.1;
    const x = (t) => x0 + ((t - tMin) / (tMax - tMin)) * (x1 - x0);
    const y = (v) => y0 - (v / vMax) * (y0 - y1);
    root.append(svg('text', { x: x0 - 4, y: y1 + 8, 'text-anchor': 'end' }, fmt(Math.round(vMax))));
    root.append(svg('text', { x: x0 - 4, y: y0, 'text-anchor': 'end' }, '0'));
    root.append(svg('text', { x: x0, y: H - 4 }, clock(tMin, tMax - tMin)));
    root.append(svg('text', { x: x1, y: H - 4, 'text-anchor': 'end' }, clock(tMax, tMax - tMin)));
    series.forEach((s, i) => {
      const points = s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
      const attrs = { class: `s${i % 6}`, points };
      if (s.points.length === 1) {
        const [t, v] = s.points[0];
        root.append(svg('circle', { class: `s${i % 6}`, cx: x(t), cy: y(v), r: 2, fill: 'currentColor' }));
      } else {
        root.append(svg('polyline', attrs));
      }
    });
  }
  const legend = h('div', { class: 'legend' }, series.map((s, i) => {
    const last = s.points.length ? s.points[s.points.length - 1][1] : undefined;
    return h('span', { class: `s${i % 6}`, text: `${s.name} ${fmt(last)}${unit}` });
  }));
  return h('div', { class: 'chart' }, h('h3', { text: title }), root, legend);
}

/** Per-second rates between consecutive points of a counter: [[t, rate]]. */
export function rates(points, value) {
  const out = [];
  for (let i = 1; i < points.length; i += 1) {
    const dt = (points[i].t - points[i - 1].t) / 1000;
    const dv = value(points[i]) - value(points[i - 1]);
    if (dt > 0) out.push([points[i].t, Math.max(dv, 0) / dt]);
  }
  return out;
}
