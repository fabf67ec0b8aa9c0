// Traces: start one (client id, username, topic filter or address), the list, a live view that
// polls the log from where it stopped (`?after=`), and the whole log as a file.

import { api, get, every, report } from './api.js';
import { h, table, fmt, notice, when } from './dom.js';

const path = (id) => `/api/v1/traces/${id}`;

async function download(id) {
  const trace = await get(`${path(id)}?after=0`);
  const blob = new Blob([trace.log], { type: 'text/plain' });
  const link = h('a', { href: URL.createObjectURL(blob), download: `ringmq-trace-${id}.log` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

/** The live view of trace `id` in `pane`; returns its stop function. */
function live(id, pane) {
  const log = h('pre', { id: 'trace-log' });
  const state = h('p', { class: 'muted', id: 'trace-state' });
  pane.replaceChildren(h('h3', { text: `Trace ${id}` }), state, log);
  let after = 0;
  return every(1000, async () => {
    const trace = await get(`${path(id)}?after=${after}`);
    if (trace.log) {
      const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      log.append(trace.log);
      if (atEnd) log.scrollTop = log.scrollHeight;
    }
    after = trace.next;
    state.textContent = `${trace.target}: ${trace.running ? 'running' : 'stopped'}, ` +
      `${fmt(trace.lines)} lines, ${fmt(trace.bytes)} bytes` +
      (trace.dropped_lines ? `, ${fmt(trace.dropped_lines)} lines dropped (size bound)` : '');
  });
}

function startForm(onStarted, status) {
  const kind = h('select', { id: 'trace-kind' },
    ['client_id', 'username', 'topic', 'address'].map((k) => h('option', { value: k, text: k.replace('_', ' ') })));
  const value = h('input', { id: 'trace-value', placeholder: 'what to trace', required: true });
  const seconds = h('input', { id: 'trace-seconds', type: 'number', min: 1, value: 60, title: 'seconds' });
  const payload = h('input', { id: 'trace-payload', type: 'number', min: 0, max: 64, value: 0, title: 'leading payload bytes shown' });
  const submit = async (e) => {
    e.preventDefault();
    try {
      const body = { [kind.value]: value.value.trim(), seconds: Number(seconds.value), payload_bytes: Number(payload.value) };
      const { id } = await api('POST', '/api/v1/traces', body);
      status.replaceChildren(notice(`Trace ${id} started.`));
      onStarted(id);
    } catch (err) {
      status.replaceChildren(notice(err.message, true));
    }
  };
  return h('form', { class: 'bar', id: 'trace-form', onsubmit: submit },
    kind, value, h('label', {}, 'seconds ', seconds), h('label', {}, 'payload bytes ', payload),
    h('button', { type: 'submit', id: 'trace-start', text: 'Start trace' }));
}

export function render(main) {
  const status = h('div');
  const list = h('div', { id: 'trace-list' });
  const pane = h('div', { class: 'panel', id: 'trace-view' }, h('p', { class: 'muted', text: 'Pick a trace to follow it.' }));
  let stopLive = null;
  const follow = (id) => {
    if (stopLive) stopLive();
    stopLive = live(id, pane);
  };
  const act = (method, url) => api(method, url).catch((e) => status.replaceChildren(notice(e.message, true)));
  const columns = [
    { title: 'Id', num: true, value: (t) => t.id },
    { title: 'Target', value: (t) => t.target },
    { title: 'State', value: (t) => h('span', { class: t.running ? 'tag up' : 'tag', text: t.running ? 'running' : 'stopped' }) },
    { title: 'Started', value: (t) => when(t.started_unix_ms, true) },
    { title: 'Lines', num: true, value: (t) => fmt(t.lines) },
    { title: 'Bytes', num: true, value: (t) => fmt(t.bytes) },
    { title: '', value: (t) => h('span', { class: 'bar' },
      h('button', { class: 'plain', text: 'View', 'data-view': t.id, onclick: () => follow(t.id) }),
      h('button', { class: 'plain', text: 'Download', 'data-download': t.id, onclick: () => download(t.id).catch(report) }),
      t.running ? h('button', { class: 'plain', text: 'Stop', onclick: () => act('POST', `${path(t.id)}/stop`) }) : '',
      h('button', { class: 'danger', text: 'Delete', onclick: () => act('DELETE', path(t.id)) })) },
  ];
  main.append(h('h2', { text: 'Traces' }), startForm(follow, status), status, list, h('h2', { text: 'Live view' }), pane);
  const stopList = every(2000, async () => {
    const { traces } = await get('/api/v1/traces');
    list.replaceChildren(traces.length ? table(columns, traces) : h('p', { class: 'muted', text: 'No trace kept.' }));
    report();
  });
  return () => { stopList(); if (stopLive) stopLive(); };
}
