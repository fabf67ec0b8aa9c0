// Small DOM helpers: elements are built with h(), never from HTML strings (no injection).

/** An element: `attrs` sets properties (`class`, `text`, `onclick`...) and `data-*` attributes. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = value;
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key.startsWith('data-') || key === 'for' || key === 'role') el.setAttribute(key, value);
    else el[key] = value;
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** A table: `columns` are `{title, value(row), num}`; a row's value may be a node. */
export function table(columns, rows, onRow) {
  const head = h('tr', {}, columns.map((c) => h('th', { class: c.num ? 'num' : '', text: c.title })));
  const body = rows.map((row) => {
    const tr = h('tr', { class: onRow ? 'clickable' : '' },
      columns.map((c) => h('td', { class: c.num ? 'num' : '' }, c.value(row))));
    if (onRow) tr.addEventListener('click', () => onRow(row, tr));
    return tr;
  });
  return h('table', {}, h('thead', {}, head), h('tbody', {}, body));
}

/** A number for people: integers with separators, others with two decimals. */
export function fmt(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  if (Number.isInteger(n)) return n.toLocaleString('en-US');
  return n.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

/** A notice line; `error` makes it red. */
export function notice(text, error = false) {
  return h('div', { class: error ? 'notice error' : 'notice', role: 'status', text });
}

/** Unix seconds or milliseconds as a local date and time. */
export function when(unix, millis = false) {
  if (!unix) return '–';
  return new Date(millis ? unix : unix * 1000).toLocaleString();
}

/** A labelled list of facts: `pairs` are [label, value]. */
export function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.flatMap(([k, v]) => [h('dt', { text: k }), h('dd', {}, v)]));
}
