// Sutra's web console: one page at /ui/ that reads and acts only through
// the public /v1 API with the token given at sign-in (docs/console.md).
import 'bpmn-js/dist/assets/diagram-js.css';
import 'bpmn-js/dist/assets/bpmn-js.css';
import '@bpmn-io/form-js/dist/assets/form-js.css';
import './style.css';
import { h, fill, api, session, link, notice, setRouter, setUnauthorizedHandler, ApiError } from './lib.js';
import { processesPage, processPage } from './processes.js';
import { instancesPage } from './instances.js';
import { instancePage } from './instance.js';
import { incidentsPage } from './incidents.js';
import { tasksPage, taskPage } from './tasks.js';
import { decisionsPage, decisionPage } from './decisions.js';

// routes: path pattern, whether it needs the admin scope, the page. A page
// added is one more line here and one in nav.
const routes = [
  [/^\/ui\/processes\/?$/, true, (m) => processesPage(m)],
  [/^\/ui\/processes\/([^/]+)$/, true, (m, [key], p, page) => processPage(m, key, p, page)],
  [/^\/ui\/instances\/?$/, true, (m, _, p, page) => instancesPage(m, p, page)],
  // An instance id may hold '/' (a called instance's is <parent>/<token>):
  // typed as it is, rather than encoded, it is still one id.
  [/^\/ui\/instances\/(.+)$/, true, (m, [id], _p, page) => instancePage(m, id, page)],
  [/^\/ui\/incidents\/?$/, true, (m, _, _p, page) => incidentsPage(m, page)],
  [/^\/ui\/tasks\/?$/, false, (m, _, p, page) => tasksPage(m, p, page)],
  [/^\/ui\/tasks\/([^/]+)$/, false, (m, [id]) => taskPage(m, id)],
  [/^\/ui\/decisions\/?$/, true, (m, _, p) => decisionsPage(m, p)],
  [/^\/ui\/decisions\/([^/]+)$/, true, (m, [id], p, page) => decisionPage(m, id, p, page)],
];

const nav = [
  ['/ui/processes', 'Processes', true],
  ['/ui/instances', 'Instances', true],
  ['/ui/incidents', 'Incidents', true],
  ['/ui/decisions', 'Decisions', true],
  ['/ui/tasks', 'User tasks', false],
];

const app = document.getElementById('app');

// Page is the life of one shown page: its polls and what it must release
// when the next one is shown.
class Page {
  constructor() {
    this.left = false;
    this.cleanups = [];
  }

  onLeave(f) { this.cleanups.push(f); }

  // every runs f every ms while the page is shown, never two at once.
  every(ms, f) {
    let timer;
    const tick = async () => {
      try {
        await f();
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 401)) console.warn('refresh failed', e);
      }
      if (!this.left) timer = setTimeout(tick, ms);
    };
    timer = setTimeout(tick, ms);
    this.onLeave(() => clearTimeout(timer));
  }

  leave() {
    this.left = true;
    for (const f of this.cleanups) f();
  }
}

let current = null;

async function route() {
  if (current) current.leave();
  const page = new Page();
  current = page;
  if (!session.token) {
    signIn();
    return;
  }
  const main = h('main', { id: 'main', tabindex: -1 }, h('p', {}, 'Loading…'));
  fill(app, shell(), main);
  // Routes match the path as the address bar holds it, and each part they
  // take is decoded once: an id holding '/' or any other reserved
  // character arrives encoded (%2F) and is passed on whole.
  const path = location.pathname;
  if (path === '/ui/' || path === '/ui') {
    history.replaceState(null, '', session.admin ? '/ui/processes' : '/ui/tasks');
    route();
    return;
  }
  const found = routes.find(([re]) => re.test(path));
  if (!found) {
    fill(main, notice('error', `No page at ${decodeURI(path)}.`));
    return;
  }
  const [re, needsAdmin, show] = found;
  if (needsAdmin && !session.admin) {
    fill(main, notice('error', 'This token opens the user tasks only: sign in with the admin token to see this page.'),
      h('p', {}, link('/ui/tasks', 'User tasks')));
    return;
  }
  try {
    const parts = re.exec(path).slice(1).map((p) => decodeURIComponent(p));
    await show(main, parts, new URLSearchParams(location.search), page);
  } catch (e) {
    if (page.left) return;
    fill(main, notice('error', e.message));
  }
  if (!page.left && document.activeElement === document.body) main.focus({ preventScroll: true });
}

function shell() {
  const here = location.pathname;
  return h('header', {},
    h('a', {
      class: 'skip',
      href: '#main',
      // Focused, not followed: a change of the address's hash would route.
      onclick: (e) => { e.preventDefault(); document.getElementById('main').focus(); },
    }, 'Skip to the page'),
    h('span', { class: 'brand' }, 'Sutra'),
    h('nav', { 'aria-label': 'Pages' }, h('ul', {},
      nav.filter(([, , admin]) => session.admin || !admin).map(([path, label]) =>
        h('li', {}, markCurrent(link(path, label), here.startsWith(path)))))),
    h('span', { class: 'who' }, `${session.scope === 'tasks' ? 'task token' : 'admin token'}${session.user ? ` · ${session.user}` : ''}`),
    h('button', { type: 'button', onclick: () => { session.clear(); route(); } }, 'Sign out'));
}

// current marks the link of the page shown, for screen readers and the eye.
function markCurrent(a, yes) {
  if (yes) a.setAttribute('aria-current', 'page');
  return a;
}

// signIn asks for a token; /v1/whoami tells whether it is refused, and
// which scope it opens.
function signIn(message) {
  const token = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true });
  const user = h('input', { id: 'user', autocomplete: 'username', value: session.user });
  const out = h('div', { 'aria-live': 'assertive' }, message ? notice('error', message) : null);
  const form = h('form', {
    class: 'signin',
    onsubmit: async (e) => {
      e.preventDefault();
      fill(out, notice('info', 'Signing in…'));
      try {
        const { scope } = await api('GET', '/v1/whoami', undefined, token.value);
        session.set(token.value, scope, user.value.trim());
        route();
      } catch (err) {
        fill(out, notice('error', err instanceof ApiError && err.status === 401
          ? 'This token is refused.' : `Sign-in failed: ${err.message}`));
        token.select();
      }
    },
  },
  h('h1', {}, 'Sutra console'),
  h('p', {}, 'Sign in with the admin token (SUTRA_ADMIN_TOKEN) to operate, or the task token (SUTRA_API_TOKEN) to work user tasks. The token is kept for this tab only.'),
  h('p', {}, h('label', { for: 'token' }, 'Token'), token),
  h('p', {}, h('label', { for: 'user' }, 'Your name, for claiming user tasks (optional)'), user),
  h('p', {}, h('button', { type: 'submit', id: 'signin' }, 'Sign in')),
  out);
  fill(app, h('main', {}, form));
  token.focus();
}

setRouter(route);
setUnauthorizedHandler(() => {
  session.clear();
  if (current) current.leave();
  signIn('The token was refused: sign in again.');
});
window.addEventListener('popstate', route);
route();
