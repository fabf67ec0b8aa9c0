// Retained messages: browse (pages of the API, by topic), search in what is loaded, delete.

import { api, pages, report } from './api.js';
import { h, table, fmt, notice } from './dom.js';

const PAGE = 1000;
const MAX_PAGES = 10;

function load() {
  const url = (after) => `/api/v1/retained?limit=${PAGE}${after === null ? '' : `&after=${encodeURIComponent(after)}`}`;
  return pages(url, (page) => page.retained, MAX_PAGES);
}

export function render(main) {
  const input = h('input', { id: 'retained-search', type: 'search', placeholder: 'topic contains' });
  const out = h('div', { id: 'retained-list' });
  const status = h('div');
  let loaded = { all: [], more: false };
  const show = () => {
    const text = input.value.trim();
    const rows = loaded.all.filter((r) => r.topic.includes(text));
    const remove = async (topic) => {
      try {
        await api('DELETE', `/api/v1/retained/${encodeURIComponent(topic)}`);
        status.replaceChildren(notice(`Cleared the retained message of ${topic}.`));
        await refresh();
      } catch (e) {
        status.replaceChildren(notice(e.message, true));
      }
    };
    out.replaceChildren(rows.length === 0 ? h('p', { class: 'muted', text: 'No retained message matches.' }) : table([
      { title: 'Topic', value: (r) => r.topic },
      { title: 'QoS', num: true, value: (r) => r.qos },
      { title: 'Payload bytes', num: true, value: (r) => fmt(r.payload_bytes) },
      { title: '', value: (r) => h('button', { class: 'danger', 'data-topic': r.topic, text: 'Delete', onclick: () => remove(r.topic) }) },
    ], rows), h('p', { class: 'muted', text: `${rows.length} of ${loaded.all.length} loaded${loaded.more ? ' (more exist)' : ''}.` }));
  };
  const refresh = async () => {
    loaded = await load();
    show();
    report();
  };
  input.addEventListener('input', show);
  main.append(h('h2', { text: 'Retained messages' }),
    h('div', { class: 'bar' }, input, h('button', { class: 'plain', text: 'Reload', onclick: () => refresh().catch(report) })),
    status, out);
  refresh().catch(report);
}
