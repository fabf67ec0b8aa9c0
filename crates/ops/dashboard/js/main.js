// The dashboard's shell: one page module at a time, chosen by the URL's fragment; a bearer
// token asked for when the API answers 401.

import { setToken, report } from './api.js';
import * as overview from './overview.js';
import * as clients from './clients.js';
import * as topics from './topics.js';
import * as retained from './retained.js';
import * as slow from './slow.js';
import * as traces from './traces.js';
import * as system from './system.js';

const PAGES = { overview, clients, topics, retained, slow, traces, system };
let stop = null;

function show() {
  const name = location.hash.slice(1) in PAGES ? location.hash.slice(1) : 'overview';
  if (stop) stop();
  const main = document.getElementById('main');
  main.replaceChildren();
  document.querySelectorAll('#nav a').forEach((a) => a.classList.toggle('active', a.hash === `#${name}`));
  document.body.dataset.page = name;
  stop = PAGES[name].render(main) || null;
}

window.addEventListener('hashchange', show);
window.addEventListener('auth-needed', () => {
  const dialog = document.getElementById('login');
  if (!dialog.open) dialog.showModal();
  report(new Error('credentials needed'));
});
document.getElementById('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  setToken(document.getElementById('token').value);
  document.getElementById('login').close();
  show();
});
show();
