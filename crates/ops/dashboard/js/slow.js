// Slow subscribers: the broker's rankings by delivery latency, by drops and by queue depth.

import { get, every, report } from './api.js';
import { h, table, fmt } from './dom.js';

const SLOW = [
  { title: 'Client id', value: (r) => r.client_id },
  { title: 'Last latency ms', num: true, value: (r) => fmt(r.last_latency_ms) },
  { title: 'Max latency ms', num: true, value: (r) => fmt(r.max_latency_ms) },
  { title: 'Slow deliveries', num: true, value: (r) => fmt(r.slow_deliveries) },
  { title: 'Dropped', num: true, value: (r) => fmt(r.dropped) },
  { title: 'Idle s', num: true, value: (r) => fmt(r.idle_seconds) },
];

const QUEUE = [
  { title: 'Client id', value: (r) => r.client_id },
  { title: 'Queued', num: true, value: (r) => fmt(r.queued) },
  { title: 'Inflight', num: true, value: (r) => fmt(r.inflight) },
];

function ranking(title, columns, rows) {
  return [h('h3', { text: title }),
    rows.length ? table(columns, rows) : h('p', { class: 'muted', text: 'Nobody.' })];
}

export function render(main) {
  const head = h('p', { class: 'muted' });
  const out = h('div', { id: 'slow' });
  main.append(h('h2', { text: 'Slow subscribers' }), head, out);
  return every(5000, async () => {
    const r = await get('/api/v1/slow_subscribers');
    head.textContent = `Deliveries slower than ${r.threshold_ms} ms count as slow; top ${r.top} of each ranking.`;
    out.replaceChildren(
      ...ranking('By delivery latency', SLOW, r.by_latency),
      ...ranking('By messages dropped', SLOW, r.by_drops),
      ...ranking('By queue depth', QUEUE, r.by_queue));
    report();
  });
}
