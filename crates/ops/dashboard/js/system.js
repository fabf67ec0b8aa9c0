// Cluster & config: the cluster's figures and the bridges' state from /metrics, the live
// nodes from /api/v1/cluster/nodes, and the effective configuration (secrets redacted by
// the API) with a reload button.

import { api, get, metrics, report, total } from './api.js';
import { h, table, fmt, notice } from './dom.js';

// [label, family] of the cluster-wide cards (every live node's heartbeat summed).
const TOTALS = [
  ['Live nodes', 'ringmq_cluster_total_nodes'],
  ['Clients, all nodes', 'ringmq_cluster_total_clients'],
  ['Sessions, all nodes', 'ringmq_cluster_total_sessions'],
  ['Subscriptions, all nodes', 'ringmq_cluster_total_subscriptions'],
  ['Messages received, all nodes', 'ringmq_cluster_total_messages_received'],
  ['Messages sent, all nodes', 'ringmq_cluster_total_messages_sent'],
];

// One row per live node, from its last heartbeat.
const NODE_COLUMNS = [
  { title: 'Node', value: (n) => (n.this_node ? h('span', {}, n.node_id, ' ', h('span', { class: 'tag up', text: 'this node' })) : n.node_id) },
  { title: 'Run', value: (n) => n.run },
  { title: 'Clients', num: true, value: (n) => fmt(n.clients) },
  { title: 'Sessions', num: true, value: (n) => fmt(n.sessions) },
  { title: 'Subs', num: true, value: (n) => fmt(n.subscriptions) },
  { title: 'Received', num: true, value: (n) => fmt(n.messages_received) },
  { title: 'Sent', num: true, value: (n) => fmt(n.messages_sent) },
  { title: 'Heartbeat', num: true, value: (n) => `${(n.heartbeat_age_ms / 1000).toFixed(1)} s ago` },
];

function nodeList(nodes) {
  if (nodes.length === 0) return h('p', { class: 'muted', id: 'cluster-nodes', text: 'No heartbeat read yet.' });
  return h('div', { id: 'cluster-nodes' }, table(NODE_COLUMNS, nodes));
}

function cluster(families, nodes) {
  const names = [...families.keys()].filter((n) => n.startsWith('ringmq_cluster_')).sort();
  if (names.length === 0) return h('p', { class: 'muted', id: 'cluster', text: 'Not clustered (no [cluster] section).' });
  const value = (n) => total(families, n);
  const up = value('ringmq_cluster_connected') > 0;
  const own = names.filter((n) => !n.startsWith('ringmq_cluster_total_'));
  return h('div', { id: 'cluster' },
    h('p', {}, 'NATS link ', h('span', { class: up ? 'tag up' : 'tag down', text: up ? 'up' : 'down' }),
      ` · ${fmt(value('ringmq_cluster_total_nodes'))} live nodes`),
    h('div', { class: 'cards' }, TOTALS.map(([label, name]) => h('div', { class: 'card' },
      h('div', { class: 'label', text: label }),
      h('div', { class: 'value', 'data-metric': name, text: fmt(value(name)) })))),
    h('h3', { text: 'Nodes' }), nodeList(nodes),
    h('h3', { text: "This node's link" }),
    h('div', { class: 'panel columns' }, own.map((n) => h('div', { class: 'kv' },
      h('span', { class: 'muted', text: n.replace('ringmq_cluster_', '').replaceAll('_', ' ') }),
      h('span', { text: fmt(value(n)) })))));
}

function bridges(families) {
  const rows = new Map();
  for (const [name, samples] of families) {
    if (!name.startsWith('ringmq_bridge_')) continue;
    for (const s of samples) {
      const bridge = s.labels.bridge;
      if (!rows.has(bridge)) rows.set(bridge, { bridge });
      rows.get(bridge)[name.replace('ringmq_bridge_', '').replace('_total', '')] = s.value;
    }
  }
  if (rows.size === 0) return h('p', { class: 'muted', id: 'bridges', text: 'No bridges configured.' });
  return h('div', { id: 'bridges' }, table([
    { title: 'Bridge', value: (b) => b.bridge },
    { title: 'State', value: (b) => h('span', { class: b.connected ? 'tag up' : 'tag down', text: b.connected ? 'connected' : 'down' }) },
    { title: 'In', num: true, value: (b) => fmt(b.messages_in) },
    { title: 'Out', num: true, value: (b) => fmt(b.messages_out) },
    { title: 'Dropped', num: true, value: (b) => fmt(b.dropped) },
    { title: 'Reconnects', num: true, value: (b) => fmt(b.reconnects) },
  ], [...rows.values()]));
}

function config(view, result, reload) {
  const restart = view.restart_required.length
    ? notice(`Waiting for a restart: ${view.restart_required.join(', ')}`)
    : '';
  return h('div', { id: 'config' },
    h('div', { class: 'bar' }, h('button', { id: 'reload', text: 'Reload configuration', onclick: reload }),
      h('span', { class: 'muted', text: 'what SIGHUP does: re-reads the file and applies what can change live' })),
    result, restart,
    h('pre', { id: 'config-toml', text: view.toml ?? '(started without a configuration file)' }));
}

export function render(main) {
  const clusterPane = h('div');
  const bridgePane = h('div');
  const configPane = h('div');
  const result = h('div', { id: 'reload-result' });
  main.append(h('h2', { text: 'Cluster' }), clusterPane, h('h2', { text: 'Bridges' }), bridgePane,
    h('h2', { text: 'Effective configuration' }), configPane);
  const reload = async () => {
    try {
      const r = await api('POST', '/api/v1/reload');
      const list = (items) => (items && items.length ? items.join(', ') : 'nothing');
      result.replaceChildren(notice(`Reloaded. Applied: ${list(r.applied)}. ` +
        `Waiting for a restart: ${list(r.restart_required)}. Errors: ${list(r.errors)}.`));
    } catch (e) {
      result.replaceChildren(notice(e.message, true));
    }
    await refresh();
  };
  const refresh = async () => {
    const [families, view] = await Promise.all([metrics(), get('/api/v1/config')]);
    const clustered = families.has('ringmq_cluster_connected');
    const nodes = clustered ? (await get('/api/v1/cluster/nodes')).nodes : [];
    clusterPane.replaceChildren(cluster(families, nodes));
    bridgePane.replaceChildren(bridges(families));
    configPane.replaceChildren(config(view, result, reload));
    report();
  };
  refresh().catch(report);
}
