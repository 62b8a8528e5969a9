// Instances: newest first by start (or end) time, filtered by process,
// version, status, open incident, the element a token waits at, a
// variable's value, a business key and creation time; paged by cursor, with
// a count of what matches (an estimate past 10,000, said so). Those
// selected, or all that match the filters, are cancelled, retried or
// migrated by a batch the server runs (POST /v1/batches), whose progress
// the page follows.
import { h, fill, api, link, table, query, go, time, notice, button, autoRefresh } from './lib.js';

// FIELDS are the list's filters; BATCH those a batch takes as its filter.
const FIELDS = ['definition', 'version', 'status', 'has_incident', 'waiting_at', 'variable', 'value', 'key', 'created_after', 'created_before'];
const BATCH = ['definition', 'version', 'status', 'has_incident', 'variable', 'value', 'created_after', 'created_before'];
// SORTS are the orders the list offers: [value, API query, caption].
const SORTS = [
  ['start', { sort: 'start' }, 'newest started first'],
  ['start-asc', { sort: 'start', order: 'asc' }, 'oldest started first'],
  ['end', { sort: 'end' }, 'latest ended first (ended only)'],
  ['end-asc', { sort: 'end', order: 'asc' }, 'earliest ended first (ended only)'],
  ['id', { sort: 'id' }, 'in id order'],
];

export async function instancesPage(main, params, page) {
  const { definitions } = await api('GET', '/v1/definitions');
  const get = (k) => params.get(k) || '';
  const field = (label, input) => h('label', {}, label, input);
  const sort = SORTS.find(([v]) => v === get('sort')) || SORTS[0];
  const inputs = {
    sort: h('select', { name: 'sort' }, SORTS.map(([v, , l]) => h('option', { value: v, selected: v === sort[0] }, l))),
    definition: h('select', { name: 'definition' }, h('option', { value: '' }, 'any'),
      definitions.map((d) => h('option', { value: d.key, selected: d.key === get('definition') }, d.key))),
    version: h('input', { name: 'version', type: 'number', min: 1, value: get('version'), size: 4 }),
    status: h('select', { name: 'status' }, ['', 'active', 'cancelling', 'completed', 'cancelled', 'terminated'].map((s) =>
      h('option', { value: s, selected: s === get('status') }, s || 'any'))),
    has_incident: h('select', { name: 'has_incident' }, [['', 'any'], ['true', 'with an open incident'], ['false', 'without']].map(([v, l]) =>
      h('option', { value: v, selected: v === get('has_incident') }, l))),
    waiting_at: await waitingAt(definitions, get('definition'), get('version'), get('waiting_at')),
    variable: h('input', { name: 'variable', value: get('variable'), placeholder: 'name' }),
    value: h('input', { name: 'value', value: get('value'), placeholder: 'JSON, e.g. "a" or 42' }),
    key: h('input', { name: 'key', value: get('key'), placeholder: 'correlation key' }),
    created_after: h('input', { name: 'created_after', type: 'datetime-local', value: local(get('created_after')) }),
    created_before: h('input', { name: 'created_before', type: 'datetime-local', value: local(get('created_before')) }),
  };
  const form = h('form', {
    class: 'filters',
    onsubmit: (e) => {
      e.preventDefault();
      const q = { sort: inputs.sort.value === 'start' ? undefined : inputs.sort.value };
      for (const k of FIELDS) {
        let v = inputs[k].value;
        if (v && k.startsWith('created_')) v = new Date(v).toISOString().replace(/\.\d+Z$/, 'Z');
        q[k] = v;
      }
      go(`/ui/instances${query(q)}`);
    },
  },
  field('Sort ', inputs.sort),
  field('Process ', inputs.definition), field('Version ', inputs.version), field('Status ', inputs.status),
  field('Incident ', inputs.has_incident), field('Waiting at ', inputs.waiting_at),
  field('Variable ', inputs.variable), field('equals ', inputs.value), field('Business key ', inputs.key),
  field('Created from ', inputs.created_after), field('until ', inputs.created_before),
  h('button', { type: 'submit' }, 'Filter'));

  const q = { ...sort[1] };
  for (const k of FIELDS) q[k] = params.get(k);
  q.after = params.get('after');
  q.limit = 50;
  q.total = 'true';
  const { instances, next, total } = await api('GET', `/v1/instances${query(q)}`);
  const selected = new Set();
  const list = h('div', {});
  const count = h('p', { id: 'instance-count', 'aria-live': 'polite' });
  // The rows are read again when a batch is done (their status changed)
  // and on every refresh.
  const showRows = (rows, n) => {
    fill(count, n.exact ? `${n.count} instance(s) match.`
      : h('span', { title: 'Counted on the first 10,000 instances walked, then estimated' }, `About ${n.count.toLocaleString()} instances match (an estimate).`));
    fill(list, table(`Instances, ${sort[2]}`, [
      ['Select', (i) => h('input', {
        type: 'checkbox', 'aria-label': `Select ${i.instance_id}`, 'data-instance': i.instance_id, checked: selected.has(i.instance_id),
        onchange: (e) => { if (e.target.checked) selected.add(i.instance_id); else selected.delete(i.instance_id); },
      })],
      ['Instance', (i) => link(`/ui/instances/${encodeURIComponent(i.instance_id)}`, i.instance_id)],
      ['Process', (i) => link(`/ui/processes/${encodeURIComponent(i.definition.key)}?version=${i.definition.version}`,
        `${i.definition.key} v${i.definition.version}`)],
      ['Status', (i) => i.status],
      ['Incident', (i) => (i.has_incident ? h('span', { class: 'bad' }, 'open') : '')],
      ['Started', (i) => time(i.created_at)],
      ['Ended', (i) => time(i.ended_at)],
      ['Duration', (i) => duration(i)],
    ], rows));
  };
  showRows(instances, total);
  const reread = async () => {
    const r = await api('GET', `/v1/instances${query(q)}`);
    showRows(r.instances, r.total);
  };
  // The cursors of the pages before this one ride in the address (back, a
  // JSON list): Previous goes to the last of them, and a page reached by
  // a link keeps its way back.
  const back = cursors(params.get('back'));
  const pageAt = (after, trail) => `/ui/instances${query({ ...q, ...Object.fromEntries(Object.keys(sort[1]).map((k) => [k, undefined])),
    sort: params.get('sort') || undefined, limit: undefined, total: undefined, after: after || undefined,
    back: trail.length ? JSON.stringify(trail) : undefined })}`;
  const more = next ? link(pageAt(next, [...back, q.after || '']),
    instances.length < q.limit ? 'Search on →' : 'Next page →') : null;
  const search = h('input', { id: 'search-id', type: 'search', placeholder: 'instance id, business key or name=value', size: 34 });
  const found = h('div', { 'aria-live': 'polite' });
  const searchForm = h('form', {
    class: 'filters', role: 'search',
    onsubmit: async (e) => {
      e.preventDefault();
      const text = search.value.trim();
      if (!text) return;
      try {
        await lookUp(text);
      } catch (err) {
        fill(found, notice('error', err.message));
      }
    },
  }, h('label', { for: 'search-id' }, 'Search '), search, h('button', { type: 'submit' }, 'Search'));
  fill(main,
    h('h1', {}, 'Instances'), searchForm, found, form,
    autoRefresh(page, 5000, reread),
    next && instances.length < q.limit
      ? notice('info', `This page searched a bounded walk of the instances and found ${instances.length}: the filters are checked on a bounded walk per page; search on for more.`) : null,
    batchTools(params, selected, page, reread),
    count, list,
    h('p', { class: 'toolbar' },
      params.get('after') ? link(pageAt('', []), '⇤ First page') : null,
      back.length ? link(pageAt(back[back.length - 1], back.slice(0, -1)), '← Previous page') : null,
      more));
}

// lookUp opens what the search box names: name=value lists the instances
// whose variable holds that value (JSON, else a string); otherwise the
// instance of that id, else the one started with that business key, else
// the list of those.
async function lookUp(text) {
  const eq = text.indexOf('=');
  if (eq > 0) {
    let value = text.slice(eq + 1).trim();
    try { JSON.parse(value); } catch { value = JSON.stringify(value); }
    go(`/ui/instances${query({ variable: text.slice(0, eq).trim(), value })}`);
    return;
  }
  try {
    await api('GET', `/v1/instances/${encodeURIComponent(text)}`);
    go(`/ui/instances/${encodeURIComponent(text)}`);
    return;
  } catch (err) {
    if (err.status !== 404) throw err;
  }
  const { instances } = await api('GET', `/v1/instances${query({ key: text, limit: 2 })}`);
  if (!instances.length) throw new Error(`No instance has the id or the business key ${text}.`);
  go(instances.length === 1 ? `/ui/instances/${encodeURIComponent(instances[0].instance_id)}` : `/ui/instances${query({ key: text })}`);
}

// waitingAt is the element filter: with a process chosen, its elements by
// name (the version chosen, else the latest), their ids as values and on
// hover; without, an element id to type.
async function waitingAt(definitions, key, version, value) {
  const def = definitions.find((d) => d.key === key);
  if (!def) return h('input', { name: 'waiting_at', value, placeholder: 'element id', size: 12 });
  const xml = await api('GET', `/v1/definitions/${encodeURIComponent(key)}/versions/${Number(version) || def.latest}`);
  const doc = new DOMParser().parseFromString(xml, 'application/xml');
  const flowNode = /(Task|Event|Gateway|^task|^subProcess|^callActivity|^transaction)$/;
  const nodes = [...doc.getElementsByTagNameNS('*', '*')]
    .filter((e) => e.namespaceURI === 'http://www.omg.org/spec/BPMN/20100524/MODEL' && flowNode.test(e.localName)
      && e.localName !== 'startEvent' && e.localName !== 'boundaryEvent' && e.getAttribute('id'))
    .map((e) => ({ id: e.getAttribute('id'), name: e.getAttribute('name') || '' }));
  return h('select', { name: 'waiting_at' }, h('option', { value: '' }, 'any element'),
    nodes.map((n) => h('option', { value: n.id, title: n.id, selected: n.id === value }, n.name ? `${n.name} (${n.id})` : n.id)));
}

// batchTools are the batch actions on the instances selected, or on all
// that match the filters (the server walks them, however many), each
// asked twice, and the batch's progress; done is called when a batch is.
function batchTools(params, selected, page, done) {
  const all = h('input', { type: 'checkbox', id: 'batch-all' });
  const target = h('input', { id: 'batch-target', type: 'number', min: 1, size: 4 });
  const ask = h('div', {});
  const progress = h('div', { id: 'batch-progress', 'aria-live': 'polite' });
  const filter = () => {
    const f = {};
    const not = FIELDS.filter((k) => !BATCH.includes(k) && params.get(k));
    if (not.length) throw new Error(`A batch does not filter by ${not.join(' or ')}: select the instances instead.`);
    for (const k of BATCH) {
      const v = params.get(k);
      if (!v) continue;
      if (k === 'version') f[k] = Number(v);
      else if (k === 'has_incident') f[k] = v === 'true';
      else if (k === 'value') {
        try { f[k] = JSON.parse(v); } catch (e) { throw new Error(`value ${v} is not JSON`); }
      } else f[k] = v;
    }
    return f;
  };
  const start = (operation, label) => async () => {
    const body = { operation };
    if (operation === 'migrate') {
      if (!(Number(target.value) >= 1)) throw new Error('Give the version to migrate to.');
      body.target_version = Number(target.value);
    }
    const doing = operation === 'migrate' ? `Migrate to version ${body.target_version}` : label;
    let what;
    if (all.checked) {
      body.filter = filter();
      what = 'every instance that matches these filters';
    } else {
      if (!selected.size) throw new Error('Select instances first, or all that match.');
      body.ids = [...selected];
      what = `${selected.size} selected instance(s)`;
    }
    fill(ask, h('p', { class: 'toolbar', role: 'group', 'aria-label': 'Confirm the batch' },
      `${doing} ${what}?`,
      button('Confirm', async () => {
        const { id } = await api('POST', '/v1/batches', body);
        fill(ask);
        follow(id);
        return '';
      }, progress, { id: 'batch-confirm', class: 'danger' }),
      h('button', { type: 'button', onclick: () => fill(ask) }, 'Back')));
    return '';
  };
  let following = null;
  const follow = (id) => {
    following = id;
    const show = async () => {
      if (following !== id) return;
      const b = await api('GET', `/v1/batches/${encodeURIComponent(id)}`);
      const refused = Object.entries(b.refused);
      const line = `Batch ${b.operation} ${b.state}: ${b.done} done${b.total === null ? '' : ` of ${b.total}`}, `
        + `${refused.reduce((n, [, c]) => n + c, 0)} refused${refused.length ? ` (${refused.map(([k, c]) => `${k}: ${c}`).join(', ')})` : ''}, `
        + `${b.failed} failed, ${b.retrying} to retry.`;
      fill(progress, notice(b.state === 'done' && !b.failed ? 'ok' : 'info', line));
      if (b.state === 'done') {
        following = null;
        await done();
      }
    };
    show();
    page.every(1000, show);
  };
  return h('div', {},
    h('div', { class: 'toolbar', id: 'batch' },
      h('label', {}, all, ' All that match these filters, on every page'),
      button('Cancel', start('cancel', 'Cancel'), progress, { class: 'danger' }),
      button('Retry incidents', start('retry', 'Retry the open incidents of'), progress),
      params.get('definition') ? [h('label', { for: 'batch-target' }, 'Migrate to version '), target,
        button('Migrate', start('migrate'), progress)] : null),
    ask, progress);
}

// cursors reads the back parameter: the cursors of the pages before,
// oldest first ([] when absent or not a list of strings).
function cursors(raw) {
  try {
    const v = JSON.parse(raw || '[]');
    return Array.isArray(v) && v.every((c) => typeof c === 'string') ? v : [];
  } catch {
    return [];
  }
}

// duration is how long an instance ran, or has been running (the API's
// duration_ms).
function duration(i) {
  const s = Math.max(0, Math.round(i.duration_ms / 1000));
  const text = s < 60 ? `${s} s` : s < 3600 ? `${Math.floor(s / 60)} min ${s % 60} s`
    : s < 86400 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  return i.ended_at ? text : `${text} (running)`;
}

// local turns an RFC 3339 time into a datetime-local input's value.
function local(t) {
  if (!t) return '';
  const d = new Date(t);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}
