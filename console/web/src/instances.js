// Instances: filtered by process, version, status, open incident, a
// variable's value and creation time; paged by cursor.
import { h, fill, api, link, table, query, go, time, notice } from './lib.js';

const FIELDS = ['definition', 'version', 'status', 'has_incident', 'variable', 'value', 'created_after', 'created_before'];

export async function instancesPage(main, params) {
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
  const more = next ? link(`/ui/instances${query({ ...q, limit: undefined, after: next })}`,
    instances.length < q.limit ? `Search on after ${next} →` : 'Next page →') : null;
  fill(main, 
    h('h1', {}, 'Instances'), form,
    next && instances.length < q.limit
      ? notice('info', `This page searched the instances up to ${next} and found ${instances.length}: the filters are checked on a bounded walk per page.`) : null,
    table('Instances, in id order', [
      ['Instance', (i) => link(`/ui/instances/${encodeURIComponent(i.instance_id)}`, i.instance_id)],
      ['Process', (i) => link(`/ui/processes/${encodeURIComponent(i.definition.key)}?version=${i.definition.version}`,
        `${i.definition.key} v${i.definition.version}`)],
      ['Status', (i) => i.status],
      ['Incident', (i) => (i.has_incident ? h('span', { class: 'bad' }, 'open') : '')],
      ['Created', (i) => time(i.created_at)],
      ['Updated', (i) => time(i.updated_at)],
    ], instances),
    h('p', {}, params.get('after') ? link(`/ui/instances${query({ ...q, limit: undefined, after: undefined })}`, '← First page') : null, ' ', more));
}

// local turns an RFC 3339 time into a datetime-local input's value.
function local(t) {
  if (!t) return '';
  const d = new Date(t);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}
