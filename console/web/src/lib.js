// What every page shares: building the DOM, calling /v1 with the tab's
// token, and navigating inside the page.

// h builds an element: h('a', {href: '/ui/x', class: 'y'}, 'text', child).
// Text is always a text node, never HTML: what the API returns is shown as
// it is, and cannot inject markup.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

// fill replaces el's children; null, undefined and false are left out (the
// DOM's own replaceChildren would show them as text).
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// The token lives in sessionStorage only: it is gone when the tab closes.
const TOKEN = 'sutra.token';
const SCOPE = 'sutra.scope';
const USER = 'sutra.user';

export const session = {
  get token() { return sessionStorage.getItem(TOKEN); },
  get scope() { return sessionStorage.getItem(SCOPE); },
  get user() { return sessionStorage.getItem(USER) || ''; },
  set(token, scope, user) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(SCOPE, scope);
    if (user) sessionStorage.setItem(USER, user);
    else sessionStorage.removeItem(USER);
  },
  clear() {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(SCOPE);
  },
  // admin reports whether the token operates (the admin scope, or an open
  // admin API).
  get admin() { return this.scope === 'admin' || this.scope === 'open'; },
};

// ApiError carries the problem document of a refused call.
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? `${problem.code}: ${problem.detail}` : `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

let onUnauthorized = () => {};
export function setUnauthorizedHandler(f) { onUnauthorized = f; }

// api calls /v1 with the tab's token (or the one given, at sign-in) and
// answers the parsed body; a refusal throws ApiError, and a 401 signs out.
export async function api(method, path, body, token = session.token) {
  // The caller names the person signed in: a user task assigned to them
  // is completed only under their name (docs/admin.md).
  const headers = { Authorization: `Bearer ${token}`, 'X-Sutra-Caller': session.user || 'console' };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  const type = res.headers.get('Content-Type') || '';
  const parsed = type.includes('json') && text ? JSON.parse(text) : text;
  if (!res.ok) {
    const err = new ApiError(res.status, typeof parsed === 'object' ? parsed : null);
    if (res.status === 401 && token === session.token) onUnauthorized(err);
    throw err;
  }
  return parsed;
}

// query builds a query string from the set fields of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

let router = () => {};
export function setRouter(f) { router = f; }

// go navigates inside the page.
export function go(path) {
  history.pushState(null, '', path);
  router();
}

// link is an anchor the page follows itself (a middle click still opens a
// tab: the server answers every /ui/ path with the page).
export function link(path, ...children) {
  return h('a', {
    href: path,
    onclick: (e) => {
      if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      e.preventDefault();
      go(path);
    },
  }, ...children);
}

// time is the one rule for every timestamp the console shows: the
// browser's local time with its zone named, and the UTC time on hover (a
// <time> element, whose datetime a reader can take). A value that is not a
// time (a due date as the BPMN gave it) is shown as it is.
export function time(t) {
  if (!t) return '—';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  const utc = d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  return h('time', { datetime: d.toISOString(), title: utc }, d.toLocaleString(undefined, { timeZoneName: 'short' }));
}

// notice is a status line that screen readers announce.
export function notice(kind, text) {
  return h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

// table renders rows with the given columns: [header, cell(row)].
export function table(caption, columns, rows) {
  return h('table', {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, columns.map(([name]) => h('th', { scope: 'col' }, name)))),
    h('tbody', {}, rows.length
      ? rows.map((r) => h('tr', {}, columns.map(([, cell]) => h('td', {}, cell(r)))))
      : h('tr', {}, h('td', { colspan: columns.length, class: 'empty' }, 'None.'))));
}

// button runs an action, shows it busy, and reports its outcome in out.
export function button(label, action, out, attrs = {}) {
  const b = h('button', {
    type: 'button', ...attrs,
    onclick: async () => {
      b.disabled = true;
      try {
        const msg = await action();
        if (out && msg) fill(out, notice('ok', msg));
      } catch (e) {
        if (out) fill(out, notice('error', e.message));
      } finally {
        b.disabled = false;
      }
    },
  }, label);
  return b;
}

// autoRefresh runs refresh every ms while page is shown, until paused: a
// toggle button (on by default) that says which it is.
export function autoRefresh(page, ms, refresh) {
  let paused = false;
  const toggle = h('button', {
    type: 'button', class: 'auto-refresh', 'aria-pressed': 'false',
    onclick: () => {
      paused = !paused;
      toggle.setAttribute('aria-pressed', String(paused));
      toggle.textContent = paused ? 'Resume auto-refresh' : 'Pause auto-refresh';
    },
  }, 'Pause auto-refresh');
  page.every(ms, async () => { if (!paused) await refresh(); });
  return h('p', { class: 'toolbar' }, toggle, h('span', { class: 'muted' }, `Refreshed every ${ms / 1000} s.`));
}

export function pretty(v) {
  return JSON.stringify(v, null, 2);
}
