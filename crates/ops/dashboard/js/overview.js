// Overview: the figures of /metrics now, and the last hour from /api/v1/history as charts.

import { get, metrics, every, report, total } from './api.js';
import { h, fmt } from './dom.js';
import { lineChart, rates } from './chart.js';

// [label, metric family] of the cards; a card shows the family's sum.
const CARDS = [
  ['Connections', 'ringmq_connections_open'],
  ['Clients connected', 'ringmq_clients_connected'],
  ['Sessions', 'ringmq_sessions'],
  ['Subscriptions', 'ringmq_subscriptions'],
  ['Retained messages', 'ringmq_retained_messages'],
  ['Messages received', 'ringmq_messages_received_total'],
  ['Messages sent', 'ringmq_messages_sent_total'],
  ['Messages dropped', 'ringmq_messages_dropped_total'],
];

function card(label, value, key) {
  return h('div', { class: 'card' },
    h('div', { class: 'label', text: label }),
    h('div', { class: 'value', 'data-metric': key, text: fmt(value) }));
}

function cards(families) {
  const list = CARDS.map(([label, name]) => card(label, total(families, name), name));
  for (const sample of families.get('ringmq_listener_connections_open') || []) {
    const listener = sample.labels.listener;
    const key = `ringmq_listener_connections_open{listener="${listener}"}`;
    list.push(card(`Connections: ${listener}`, sample.value, key));
  }
  return h('div', { class: 'cards', id: 'cards' }, list);
}

function keyed(points, field) {
  const names = new Set(points.flatMap((p) => Object.keys(p[field] || {})));
  return [...names].sort();
}

function charts(history) {
  const points = history.points || [];
  const listeners = keyed(points, 'connections');
  const reasons = keyed(points, 'drops')
    .filter((r) => points.some((p) => (p.drops[r] || 0) !== (points[0].drops[r] || 0)));
  return h('div', { class: 'charts', id: 'charts' },
    lineChart('Connections by listener', listeners.map((name) => ({
      name, points: points.map((p) => [p.t, p.connections[name] || 0]),
    }))),
    lineChart('Sessions', [{ name: 'sessions', points: points.map((p) => [p.t, p.sessions]) }]),
    lineChart('Messages per second', [
      { name: 'in', points: rates(points, (p) => p.received) },
      { name: 'out', points: rates(points, (p) => p.sent) },
    ], '/s'),
    lineChart('Drops per second by reason', reasons.length
      ? reasons.map((name) => ({ name, points: rates(points, (p) => p.drops[name] || 0) }))
      : [{ name: 'none', points: rates(points, () => 0) }], '/s'));
}

export function render(main) {
  const note = h('p', { class: 'muted' });
  const top = h('div');
  const bottom = h('div');
  main.append(h('h2', { text: 'Overview' }), top, bottom, note);
  // Refreshed as often as the ring takes a point, at most every second, at least every 5 s.
  let period = 5000;
  return every(() => period, async () => {
    const [families, history] = await Promise.all([metrics(), get('/api/v1/history')]);
    period = Math.min(Math.max(history.interval_ms, 1000), 5000);
    top.replaceChildren(cards(families));
    bottom.replaceChildren(charts(history));
    const seconds = history.interval_ms / 1000;
    const span = history.points.length * seconds;
    const kept = span < 120 ? `${Math.round(span)} s` : `${Math.round(span / 60)} min`;
    note.textContent = `History: ${history.points.length} of ${history.capacity} samples, ` +
      `one every ${seconds} s (${kept} so far, kept in memory by the listener).`;
    report();
  });
}
