// Instances: filtered by process, version, status, open incident, a
// variable's value and creation time; paged by cursor. Those selected, or
// all that match the filters, are cancelled, retried or migrated by a
// batch the server runs (POST /v1/batches), whose progress the page
// follows.
import { h, fill, api, link, table, query, go, time, notice, button, autoRefresh } from './lib.js';

const FIELDS = ['definition', 'version', 'status', 'has_incident', 'variable', 'value', 'created_after', 'created_before'];

export async function instancesPage(main, params, page) {
  const { definitions } = await api('GET', '/v1/definitions');
  const get = (k) => params.get(k) || '';
  const field = (label, input) => h('label', {}, label, input);
  const inputs = {
    definition: h('select', { name: 'definition' }, h('option', { value: '' }, 'any'),
      definitions.map((d) => h('option', { value: d.key, selected: d.key === get('definition') }, d.key))),
    version: h('input', { name: 'version', type: 'number', min: 1, value: get('version'), size: 4 }),
    status: h('select', { name: 'status' }, ['', 'active', 'cancelling', 'completed', 'cancelled', 'terminated'].map((s) =>
      h('option', { value: s, selected: s === get('status') }, s || 'any'))),
    has_incident: h('select', { name: 'has_incident' }, [['', 'any'], ['true', 'with an open incident'], ['false', 'without']].map(([v, l]) =>
      h('option', { value: v, selected: v === get('has_incident') }, l))),
    variable: h('input', { name: 'variable', value: get('variable'), placeholder: 'name' }),
    value: h('input', { name: 'value', value: get('value'), placeholder: 'JSON, e.g. "a" or 42' }),
    created_after: h('input', { name: 'created_after', type: 'datetime-local', value: local(get('created_after')) }),
    created_before: h('input', { name: 'created_before', type: 'datetime-local', value: local(get('created_before')) }),
  };
  const form = h('form', {
    class: 'filters',
    onsubmit: (e) => {
      e.preventDefault();
      const q = {};
      for (const k of FIELDS) {
        let v = inputs[k].value;
        if (v && k.startsWith('created_')) v = new Date(v).toISOString().replace(/\.\d+Z$/, 'Z');
        q[k] = v;
      }
      go(`/ui/instances${query(q)}`);
    },
  },
  field('Process ', inputs.definition), field('Version ', inputs.version), field('Status ', inputs.status),
  field('Incident ', inputs.has_incident), field('Variable ', inputs.variable), field('equals ', inputs.value),
  field('Created from ', inputs.created_after), field('until ', inputs.created_before),
  h('button', { type: 'submit' }, 'Filter'));

  const q = {};
  for (const k of FIELDS) q[k] = params.get(k);
  q.after = params.get('after');
  q.limit = 50;
  const { instances, next } = await api('GET', `/v1/instances${query(q)}`);
  const selected = new Set();
  const list = h('div', {});
  // The rows are read again when a batch is done: their status changed.
  const showRows = (rows) => fill(list, table('Instances, in id order', [
    ['Select', (i) => h('input', {
      type: 'checkbox', 'aria-label': `Select ${i.instance_id}`, 'data-instance': i.instance_id, checked: selected.has(i.instance_id),
      onchange: (e) => { if (e.target.checked) selected.add(i.instance_id); else selected.delete(i.instance_id); },
    })],
    ['Instance', (i) => link(`/ui/instances/${encodeURIComponent(i.instance_id)}`, i.instance_id)],
    ['Process', (i) => link(`/ui/processes/${encodeURIComponent(i.definition.key)}?version=${i.definition.version}`,
      `${i.definition.key} v${i.definition.version}`)],
    ['Status', (i) => i.status],
    ['Incident', (i) => (i.has_incident ? h('span', { class: 'bad' }, 'open') : '')],
    ['Created', (i) => time(i.created_at)],
    ['Updated', (i) => time(i.updated_at)],
    ['Duration', (i) => duration(i)],
  ], rows));
  showRows(instances);
  const reread = async () => showRows((await api('GET', `/v1/instances${query(q)}`)).instances);
  // The cursors of the pages before this one ride in the address (back, a
  // JSON list): Previous goes to the last of them, and a page reached by
  // a link keeps its way back.
  const back = cursors(params.get('back'));
  const pageAt = (after, trail) => `/ui/instances${query({ ...q, limit: undefined, after: after || undefined,
    back: trail.length ? JSON.stringify(trail) : undefined })}`;
  const more = next ? link(pageAt(next, [...back, q.after || '']),
    instances.length < q.limit ? `Search on after ${next} →` : 'Next page →') : null;
  const search = h('input', { id: 'search-id', type: 'search', placeholder: 'an instance id' });
  const found = h('div', { 'aria-live': 'polite' });
  const searchForm = h('form', {
    class: 'filters', role: 'search',
    onsubmit: async (e) => {
      e.preventDefault();
      const id = search.value.trim();
      if (!id) return;
      try {
        await api('GET', `/v1/instances/${encodeURIComponent(id)}`);
        go(`/ui/instances/${encodeURIComponent(id)}`);
      } catch (err) {
        fill(found, notice('error', err.status === 404 ? `No instance ${id}.` : err.message));
      }
    },
  }, h('label', { for: 'search-id' }, 'Open instance '), search, h('button', { type: 'submit' }, 'Open'));
  fill(main, 
    h('h1', {}, 'Instances'), searchForm, found, form,
    autoRefresh(page, 5000, reread),
    next && instances.length < q.limit
      ? notice('info', `This page searched the instances up to ${next} and found ${instances.length}: the filters are checked on a bounded walk per page.`) : null,
    batchTools(params, selected, page, reread),
    list,
    h('p', { class: 'toolbar' },
      params.get('after') ? link(pageAt('', []), '⇤ First page') : null,
      back.length ? link(pageAt(back[back.length - 1], back.slice(0, -1)), '← Previous page') : null,
      more));
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
    for (const k of FIELDS) {
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

// duration is how long an instance ran (until its last step, once ended)
// or has been running.
function duration(i) {
  const ended = !['active', 'cancelling'].includes(i.status);
  const ms = (ended ? new Date(i.updated_at) : new Date()) - new Date(i.created_at);
  const s = Math.max(0, Math.round(ms / 1000));
  const text = s < 60 ? `${s} s` : s < 3600 ? `${Math.floor(s / 60)} min ${s % 60} s`
    : s < 86400 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  return ended ? text : `${text} (running)`;
}

// local turns an RFC 3339 time into a datetime-local input's value.
function local(t) {
  if (!t) return '';
  const d = new Date(t);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}
