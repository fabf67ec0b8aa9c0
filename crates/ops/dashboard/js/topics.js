// Topics & subscriptions: every subscription's filter as a tree of levels, with how many
// sessions subscribe at each node; shared subscriptions ($share/group/filter) under their
// filter, by group.

import { pages, report } from './api.js';
import { h, fmt } from './dom.js';

const PAGE = 1000;
const MAX_PAGES = 20;

function load() {
  const cursor = (next) => (next ? `&after_client=${encodeURIComponent(next.after_client)}&after_filter=${encodeURIComponent(next.after_filter)}` : '');
  return pages((next) => `/api/v1/subscriptions?limit=${PAGE}${cursor(next)}`, (page) => page.subscriptions, MAX_PAGES);
}

function node() {
  return { children: new Map(), subscribers: 0, groups: new Map() };
}

/** The tree of `subscriptions`' filters. */
export function tree(subscriptions) {
  const root = node();
  for (const s of subscriptions) {
    let filter = s.filter;
    let group = null;
    const shared = /^\$share\/([^/]+)\/(.*)$/.exec(filter);
    if (shared) [, group, filter] = shared;
    let at = root;
    for (const level of filter.split('/')) {
      if (!at.children.has(level)) at.children.set(level, node());
      at = at.children.get(level);
    }
    if (group === null) at.subscribers += 1;
    else at.groups.set(group, (at.groups.get(group) || 0) + 1);
  }
  return root;
}

function below(n) {
  let count = n.subscribers + [...n.groups.values()].reduce((a, b) => a + b, 0);
  for (const child of n.children.values()) count += below(child);
  return count;
}

function view(n, path) {
  const items = [...n.children.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([level, child]) => {
    const filter = path ? `${path}/${level}` : level;
    const here = [];
    if (child.subscribers) here.push(h('span', { class: 'tag up count', 'data-filter': filter, text: `${fmt(child.subscribers)} subscriber${child.subscribers === 1 ? '' : 's'}` }));
    for (const [group, count] of child.groups) {
      here.push(h('span', { class: 'tag count', 'data-group': `${group}/${filter}`, text: `shared ${group}: ${fmt(count)}` }));
    }
    const label = h('summary', {}, h('span', { class: 'level', text: level || '(empty)' }), here,
      child.children.size ? h('span', { class: 'muted count', text: `${fmt(below(child))} below` }) : '');
    if (child.children.size === 0) return h('li', {}, h('span', { class: 'level', text: level || '(empty)' }), here);
    return h('li', {}, h('details', { open: true }, label, view(child, filter)));
  });
  return h('ul', {}, items);
}

export function render(main) {
  const out = h('div', { class: 'panel tree', id: 'topic-tree' });
  const summary = h('p', { class: 'muted' });
  main.append(h('h2', { text: 'Topics & subscriptions' }), summary, out);
  load().then(({ all, more }) => {
    const root = tree(all);
    const sessions = new Set(all.map((s) => s.client_id)).size;
    summary.textContent = `${fmt(all.length)} subscriptions of ${fmt(sessions)} sessions${more ? ' (the first ones only)' : ''}.`;
    out.replaceChildren(all.length ? view(root, '') : h('p', { class: 'muted', text: 'No subscriptions.' }));
    report();
  }).catch(report);
}
