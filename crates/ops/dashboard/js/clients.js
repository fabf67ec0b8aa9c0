// Clients: search by client id, username or address (the API's `search`), a client's detail
// (subscriptions, inflight, queue) and disconnecting it with a reason code.

import { api, get, report } from './api.js';
import { h, table, fmt, notice, when, facts } from './dom.js';

// DISCONNECT reason codes an operator picks from (MQTT 5.0; 3.x clients are just closed).
const REASONS = [
  ['0x98', 'Administrative action'],
  ['0x89', 'Server busy'],
  ['0x8B', 'Server shutting down'],
  ['0x87', 'Not authorized'],
  ['0x9C', 'Use another server'],
  ['0x9D', 'Server moved'],
];

const COLUMNS = [
  { title: 'Client id', value: (c) => c.client_id },
  { title: 'User', value: (c) => c.username ?? '–' },
  { title: 'State', value: (c) => h('span', { class: c.connected ? 'tag up' : 'tag', text: c.connected ? 'connected' : 'offline' }) },
  { title: 'Address', value: (c) => c.address || '–' },
  { title: 'Protocol', value: (c) => c.protocol },
  { title: 'Subs', num: true, value: (c) => fmt(c.subscriptions) },
  { title: 'Inflight', num: true, value: (c) => fmt(c.inflight) },
  { title: 'Queued', num: true, value: (c) => fmt(c.queued) },
  { title: 'Connected since', value: (c) => when(c.connected_since) },
];

const path = (id) => `/api/v1/clients/${encodeURIComponent(id)}`;

async function kick(id, reason, out) {
  try {
    const answer = await api('DELETE', `${path(id)}?reason=${reason}`);
    out.replaceChildren(notice(`Disconnected ${answer.disconnected} (${answer.reason}).`));
  } catch (e) {
    out.replaceChildren(notice(e.message, true));
  }
}

async function detail(id, pane) {
  const c = await get(path(id));
  const reason = h('select', { id: 'kick-reason' },
    REASONS.map(([code, name]) => h('option', { value: code, text: `${code} ${name}` })));
  const result = h('div', { id: 'kick-result' });
  const button = h('button', { class: 'danger', id: 'kick', text: 'Disconnect', disabled: !c.connected,
    onclick: () => kick(id, reason.value, result) });
  const subs = c.subscription_list.length
    ? table([
      { title: 'Filter', value: (s) => s.filter },
      { title: 'QoS', num: true, value: (s) => s.qos },
      { title: 'Options', value: (s) => [s.no_local && 'no local', s.retain_as_published && 'retain as published', `retain handling ${s.retain_handling}`].filter(Boolean).join(', ') },
    ], c.subscription_list)
    : h('p', { class: 'muted', text: 'No subscriptions.' });
  pane.replaceChildren(h('div', { class: 'panel', id: 'client-detail' },
    h('h3', { text: c.client_id }),
    facts([
      ['State', c.connected ? 'connected' : 'offline'],
      ['Username', c.username ?? '–'],
      ['Address', c.address || '–'],
      ['Protocol', c.protocol],
      ['Keep alive', c.keep_alive === null ? '–' : `${c.keep_alive} s`],
      ['Session expiry', c.session_expiry === null ? 'never' : `${c.session_expiry} s`],
      ['Inflight', fmt(c.inflight)],
      ['Queued', `${fmt(c.queued)} (${fmt(c.queued_on_disk)} on disk)`],
      ['Shard', c.shard],
    ]),
    h('h3', { text: 'Subscriptions' }), subs,
    h('div', { class: 'bar' }, reason, button), result));
}

export function render(main) {
  const input = h('input', { id: 'client-search', type: 'search', placeholder: 'client id, username or address' });
  const list = h('div', { id: 'client-list' });
  const pane = h('div');
  const search = async () => {
    const query = input.value.trim();
    const answer = await get(`/api/v1/clients?limit=200${query ? `&search=${encodeURIComponent(query)}` : ''}`);
    const shown = answer.clients.length === 0
      ? h('p', { class: 'muted', text: 'No client matches.' })
      : table(COLUMNS, answer.clients, (c, tr) => {
        list.querySelectorAll('tr.selected').forEach((r) => r.classList.remove('selected'));
        tr.classList.add('selected');
        detail(c.client_id, pane).catch((e) => pane.replaceChildren(notice(e.message, true)));
      });
    list.replaceChildren(shown, answer.next ? h('p', { class: 'muted', text: 'More clients match: refine the search.' }) : '');
    report();
  };
  const form = h('form', { class: 'bar', onsubmit: (e) => { e.preventDefault(); search().catch(report); } },
    input, h('button', { type: 'submit', id: 'client-search-go', text: 'Search' }));
  main.append(h('h2', { text: 'Clients' }), form, h('div', { class: 'split' }, list, pane));
  search().catch(report);
}
