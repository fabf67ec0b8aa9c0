// The listener's API from the page: same origin only; state-changing calls send JSON (the
// listener refuses any other body type); with a bearer token, it is sent in Authorization.

const TOKEN_KEY = 'ringmq-token';

/** Raised on a 401: main.js asks for the token. */
export class AuthNeeded extends Error {}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(json) {
  const out = {};
  if (json) out['Content-Type'] = 'application/json';
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

async function send(method, path, body) {
  const init = { method, headers: headers(method !== 'GET'), credentials: 'same-origin' };
  if (body !== undefined) init.body = JSON.stringify(body);
  // From the origin, not the page's address: an address typed with a user and password keeps
  // them, and fetch refuses a URL with credentials (the browser sends them itself).
  const response = await fetch(new URL(path, location.origin), init);
  if (response.status === 401) {
    window.dispatchEvent(new Event('auth-needed'));
    throw new AuthNeeded('credentials needed');
  }
  return response;
}

/** Calls the admin API; the JSON answer, or an Error with the API's message. */
export async function api(method, path, body) {
  const response = await send(method, path, body);
  const value = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(value.error || value.refused || `${response.status} ${response.statusText}`);
  return value;
}

export const get = (path) => api('GET', path);

/** Up to `max` pages of a list: `url(cursor)` names a page (`null`: the first), `items(page)`
 * its items; the items and whether more pages exist. */
export async function pages(url, items, max) {
  const all = [];
  let cursor = null;
  for (let i = 0; i < max; i += 1) {
    const page = await get(url(cursor));
    all.push(...items(page));
    cursor = page.next;
    if (cursor === null || cursor === undefined) return { all, more: false };
  }
  return { all, more: true };
}

/** `/metrics`, parsed: name -> [{labels, value}]. */
export async function metrics() {
  const response = await send('GET', '/metrics');
  if (!response.ok) throw new Error(`/metrics: ${response.status}`);
  return parseMetrics(await response.text());
}

/** The Prometheus text format's samples (labels without escapes, which RingMQ never writes). */
export function parseMetrics(text) {
  const families = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[2] || '').matchAll(/(\w+)="([^"]*)"/g)) labels[pair[1]] = pair[2];
    if (!families.has(match[1])) families.set(match[1], []);
    families.get(match[1]).push({ labels, value: Number(match[3]) });
  }
  return families;
}

/** The sum of a family's samples (0 when absent). */
export function total(families, name) {
  return (families.get(name) || []).reduce((sum, s) => sum + s.value, 0);
}

/** Runs `task` now and every `ms` (a number, or a function giving it) until the returned
 * function is called. */
export function every(ms, task) {
  let timer = null;
  let stopped = false;
  const run = async () => {
    try { await task(); } catch (e) { report(e); }
    if (!stopped) timer = setTimeout(run, typeof ms === 'function' ? ms() : ms);
  };
  run();
  return () => { stopped = true; clearTimeout(timer); };
}

/** Shows an error in the header's status line. */
export function report(error) {
  const status = document.getElementById('status');
  if (error instanceof AuthNeeded) return;
  status.textContent = error ? String(error.message || error) : `updated ${new Date().toLocaleTimeString()}`;
  status.className = error ? 'error' : '';
}
