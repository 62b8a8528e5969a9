// An instance: its diagram with the elements it waits at and the path it
// took marked, its variables (edited with PATCH), incidents (retried), waits, the history
// of its steps, and the actions cancel and migrate (previewed by the
// server's preflight). It follows the instance every 2 s.
import { h, fill, api, link, table, notice, button, pretty, time, query } from './lib.js';
import { Diagram } from './diagram.js';

// historyPage is how many steps the history shows at first, and loads at
// a time.
const historyPage = 20;

export async function instancePage(main, id, page) {
  const path = `/v1/instances/${encodeURIComponent(id)}`;
  let inst = await api('GET', path);
  const canvas = h('div', { class: 'diagram', role: 'img', 'aria-label': `Diagram of instance ${id}` });
  const header = h('div', {});
  const out = h('div', { 'aria-live': 'polite' });
  const details = h('div', {});
  const actions = h('div', {});
  const steps = h('div', {});
  fill(main, h('h1', {}, `Instance ${id}`), header, out, canvas, legend(), actions, details,
    h('h2', { id: 'history' }, 'History'), steps);
  const diagram = new Diagram(canvas);
  page.onLeave(() => diagram.destroy());
  let shown = null; // the definition version drawn
  let editing = false; // the variables editor is open: keep it as it is
  let passed = new Set(); // the path of the steps the history lists

  const render = async () => {
    const ref = `${inst.definition.key}@${inst.definition.version}`;
    if (shown !== ref) {
      await diagram.show(await api('GET', `/v1/definitions/${encodeURIComponent(inst.definition.key)}/versions/${inst.definition.version}`));
      shown = ref;
    }
    diagram.mark(markers(inst, passed));
    fill(header, h('p', { class: 'toolbar' },
      'Process ', link(`/ui/processes/${encodeURIComponent(inst.definition.key)}?version=${inst.definition.version}`,
        `${inst.definition.key} v${inst.definition.version}`),
      ' · status ', h('strong', { id: 'status' }, inst.status),
      ' · step ', inst.version,
      ' · created ', time(inst.created_at), ' · updated ', time(inst.updated_at),
      inst.parent_id ? [' · parent ', link(`/ui/instances/${encodeURIComponent(inst.parent_id)}`, inst.parent_id)] : null,
      inst.claim ? ` · claimed by ${inst.claim.owner} for ${inst.claim.age_seconds.toFixed(1)} s` : null),
    banner(inst));
    if (!editing) fill(details, ...sections());
  };

  // reload follows the instance: its actions follow its status (no
  // Cancel once it has ended), whichever call saw the change first.
  const reload = async () => {
    const next = await api('GET', path);
    const stepped = next.version !== inst.version;
    const ended = next.status !== inst.status;
    if (stepped || ended || next.claim?.owner !== inst.claim?.owner || calledChanged(inst, next)) {
      inst = next;
      await render();
    }
    if (ended) await renderActions();
    if (stepped) await history.reload();
  };

  const history = stepHistory(steps, path, (ids) => {
    passed = ids;
    if (shown) diagram.mark(markers(inst, passed));
  });

  const sections = () => {
    const open = inst.incidents.filter((x) => !x.resolved_at);
    return [
      h('h2', { id: 'incidents', tabindex: -1 }, 'Incidents'),
      table('Open incidents', [
        ['Element', (x) => diagram.label(x.element)],
        ['Code', (x) => x.code],
        ['Reason', (x) => [x.message, workerError(x)]],
        ['Since', (x) => time(x.created_at)],
        ['', (x) => button('Retry', async () => {
          const r = await api('POST', `/v1/incidents/${x.id}/retry`, {});
          await reload();
          // The retry's step has run when the call answers: a token that
          // stopped again at once is a new incident, not a success.
          const again = inst.incidents.find((y) => !y.resolved_at && y.id !== x.id && y.token === x.token);
          if (again) throw new Error(`Incident ${x.id} was retried, but it failed again: ${again.code}: ${again.message}`);
          return r.resolved ? `Incident ${x.id} retried.` : `Incident ${x.id} was already resolved.`;
        }, out, { 'data-incident': x.id })],
      ], open),
      inst.called_incidents.length ? table('Open incidents in called instances', [
        ['Call activity', (x) => diagram.label(x.called_by)],
        ['Instance', (x) => link(`/ui/instances/${encodeURIComponent(x.instance_id)}`, x.instance_id)],
        ['Element', (x) => x.element],
        ['Code', (x) => x.code],
        ['Reason', (x) => [x.message, workerError(x)]],
        ['Since', (x) => time(x.created_at)],
      ], inst.called_incidents) : null,
      h('h2', {}, 'Waiting at'),
      table('Tokens', [
        ['Element', (t) => diagram.label(t.element)], ['Waits for', (t) => t.wait], ['Token', (t) => t.id],
        ['Called instance', (t) => (t.called_instance
          ? link(`/ui/instances/${encodeURIComponent(t.called_instance)}`, t.called_instance) : '')],
      ], inst.tokens),
      table('Open tasks', [
        ['Element', (t) => diagram.label(t.element)], ['Topic', (t) => t.topic], ['Kind', (t) => (t.user_task ? 'user task' : 'external task')],
        ['Retries', (t) => t.retries], ['Locked by', (t) => t.locked_by || ''],
      ], inst.waits.tasks),
      table('Timers', [['Element', (t) => diagram.label(t.element)], ['Due', (t) => time(t.due_at)], ['Attempts', (t) => t.attempts]], inst.waits.timers),
      table('Message subscriptions', [
        ['Element', (s) => diagram.label(s.element)], ['Message', (s) => s.message], ['Correlation key', (s) => s.correlation_key],
      ], inst.waits.subscriptions),
      h('h2', {}, 'Variables'),
      variables(),
      inst.incidents.length > open.length ? [h('h2', {}, 'Resolved incidents'), table('Resolved incidents', [
        ['Element', (x) => diagram.label(x.element)], ['Code', (x) => x.code], ['Reason', (x) => x.message], ['Resolved', (x) => time(x.resolved_at)],
      ], inst.incidents.filter((x) => x.resolved_at))] : null,
    ];
  };

  const variables = () => {
    const list = table('Variables', [['Name', ([k]) => k], ['Value', ([, v]) => h('code', {}, JSON.stringify(v))]],
      Object.entries(inst.variables));
    if (inst.status !== 'active') return list;
    const edit = button('Edit variables', async () => {
      editing = true;
      const area = h('textarea', { id: 'variables', rows: 12, cols: 60, 'aria-label': 'Variables to set, as a JSON object' },
        pretty(inst.variables));
      const done = () => { editing = false; fill(details, ...sections()); };
      details.querySelector('.variables').replaceChildren(
        h('label', { for: 'variables' }, 'Variables to set (a JSON object; the names given are replaced, the others kept)'),
        area,
        h('p', {},
          button('Save', async () => {
            let vars;
            try { vars = JSON.parse(area.value); } catch (e) { throw new Error(`not JSON: ${e.message}`); }
            const r = await api('PATCH', `${path}/variables`, vars);
            inst.variables = r.variables;
            done();
            await reload();
            return 'Variables saved.';
          }, out), ' ',
          h('button', { type: 'button', onclick: done }, 'Discard')));
      area.focus();
    }, out);
    return h('div', { class: 'variables' }, list, h('p', {}, edit));
  };

  // modification moves tokens (Operate's "modify instance"): the tokens
  // ticked end, a token starts at the element chosen; the server's
  // preflight says where the tokens would be before Apply.
  const modification = () => {
    const top = inst.tokens.filter((t) => !t.scope);
    const ticks = top.map((t) => h('label', {}, h('input', { type: 'checkbox', 'data-token': t.id, onchange: () => preview() }),
      ' ', diagram.label(t.element), ` (${t.id}, ${t.wait})`));
    const start = h('select', { id: 'modify-activate', onchange: () => preview() }, h('option', { value: '' }, 'nowhere'),
      diagram.flowNodes().map((e) => h('option', { value: e.id }, e.name ? `${e.name} (${e.id})` : e.id)));
    const said = h('div', { id: 'modify-preview', 'aria-live': 'polite' });
    const body = () => ({
      cancel: ticks.map((l) => l.querySelector('input')).filter((c) => c.checked).map((c) => c.dataset.token),
      activate: start.value ? [start.value] : [],
    });
    const preview = async () => {
      const b = body();
      if (!b.cancel.length && !b.activate.length) { fill(said); return; }
      try {
        const p = await api('POST', `${path}/modification/preflight`, b);
        fill(said, p.ok
          ? notice('ok', `The preflight (step ${p.version}): the instance would be ${p.instance_status}, `
            + `its tokens at ${p.tokens.map((t) => `${diagram.name(t.element) || t.element} (${t.wait})`).join(', ') || 'no element'}.`)
          : notice('error', `The modification would be refused (${p.status} ${p.code}): ${p.detail}`));
      } catch (e) {
        fill(said, notice('error', `The preflight failed: ${e.message}`));
      }
    };
    return h('details', {}, h('summary', {}, 'Modify the instance (move tokens)'),
      h('fieldset', {}, h('legend', {}, 'End these tokens'), ticks),
      h('p', {}, h('label', { for: 'modify-activate' }, 'Start a token at '), start),
      said,
      h('p', {}, button('Apply modification', async () => {
        const r = await api('POST', `${path}/modification`, body());
        await reload();
        await renderActions(); // its tokens changed, if not its status
        return `Modified: the instance is ${r.status}.`;
      }, out, { id: 'modify-apply' })));
  };

  const renderActions = async () => {
    if (inst.status !== 'active') {
      fill(actions, );
      return;
    }
    const { definitions } = await api('GET', '/v1/definitions');
    const def = definitions.find((d) => d.key === inst.definition.key);
    const target = h('select', { id: 'target' },
      (def ? def.versions : []).filter((v) => v !== inst.definition.version).map((v) => h('option', { value: v }, `version ${v}`)));
    const mapping = h('textarea', { id: 'mapping', rows: 3, cols: 40, 'aria-label': 'Mapping: source element id to target element id, a JSON object' }, '{}');
    const preview = h('div', { 'aria-live': 'polite' });
    // The server's preflight answers where each token would land, or the
    // refusal the migration would meet: the page checks nothing itself.
    const showPreview = async () => {
      if (!target.value) return;
      let map;
      try { map = JSON.parse(mapping.value || '{}'); } catch (e) { fill(preview, notice('error', `mapping: ${e.message}`)); return; }
      let p;
      try {
        p = await api('POST', `${path}/migrate/preflight`, { target_version: Number(target.value), mapping: map });
      } catch (e) {
        fill(preview, notice('error', `The preflight failed: ${e.message}`));
        return;
      }
      fill(preview, p.ok
        ? notice('ok', `The preflight (step ${p.version}) finds every token a place in version ${p.to.version}.`)
        : notice('error', `The migration would be refused (${p.status} ${p.code}): ${p.detail}`),
      p.ok ? table(`Where the tokens would be in version ${p.to.version}`, [
        ['Token', (t) => t.id], ['From', (t) => t.from], ['To', (t) => t.to], ['Waits for', (t) => t.wait],
      ], p.tokens) : null);
    };
    target.addEventListener('change', showPreview);
    mapping.addEventListener('change', showPreview);
    fill(actions, h('h2', {}, 'Actions'), modification(), h('div', { class: 'toolbar' },
      button('Cancel instance', async () => {
        if (!confirm(`Cancel instance ${id}? Every token is killed.`)) return '';
        const r = await api('POST', `${path}/cancel`, {});
        await reload();
        return r.status === 'cancelling'
          ? 'Cancel recorded: the instance is cancelling until the canceling listeners of its user tasks are done.'
          : 'Instance cancelled.';
      }, out, { class: 'danger' })),
      target.options.length ? h('details', {}, h('summary', {}, 'Migrate to another version'),
        h('p', {}, h('label', { for: 'target' }, 'Target '), target),
        h('p', {}, h('label', { for: 'mapping' }, 'Mapping of element ids (only those renamed) '), mapping),
        preview,
        h('p', {}, button('Migrate', async () => {
          const r = await api('POST', `${path}/migrate`, { target_version: Number(target.value), mapping: JSON.parse(mapping.value || '{}') });
          await reload();
          await renderActions();
          return `Migrated to ${r.definition.key} v${r.definition.version}.`;
        }, out))) : null);
    await showPreview();
  };

  await render();
  await renderActions();
  await history.reload();
  page.every(2000, async () => {
    const before = inst.status;
    await reload();
    if (inst.status !== before) await renderActions();
  });
}

// markers: the elements and flows the instance passed, the elements it
// waits at, and those stopped by an incident.
function markers(inst, passed) {
  const m = {};
  const add = (el, cls) => { (m[el] ||= new Set()).add(cls); };
  for (const id of passed) add(id, 'sutra-passed');
  for (const t of inst.tokens) add(t.element, t.wait === 'incident' ? 'sutra-incident' : 'sutra-waiting');
  for (const x of inst.incidents) if (!x.resolved_at) add(x.element, 'sutra-incident');
  for (const x of inst.called_incidents) add(x.called_by, 'sutra-incident');
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, [...v]]));
}

// banner says at the top of the page that the instance is stopped by an
// incident, its own or one of an instance it called, with the first one's
// reason and a way to its table.
function banner(inst) {
  const open = [...inst.incidents.filter((x) => !x.resolved_at), ...inst.called_incidents];
  if (!open.length) return null;
  const x = open[0];
  const where = x.instance_id && x.instance_id !== inst.instance_id ? ` in called instance ${x.instance_id}` : '';
  return h('p', { class: 'notice error', role: 'alert', id: 'incident-banner' },
    `${open.length} open incident(s). ${x.code} at ${x.element}${where}: ${x.error_message || x.message} `,
    h('a', {
      href: '#incidents',
      onclick: (e) => { e.preventDefault(); document.getElementById('incidents').focus(); },
    }, 'See the incidents'));
}

// workerError shows what the worker of a task that failed for good
// reported: its message and, folded, its details (a stack trace).
function workerError(x) {
  if (!x.error_message && !x.error_details) return null;
  return h('details', { class: 'worker-error' }, h('summary', {}, `The worker's error: ${x.error_message || '(no message)'}`),
    x.error_details ? h('pre', {}, x.error_details) : null);
}

// calledChanged reports whether the open incidents of an instance's called
// instances changed, which its own step does not show.
function calledChanged(a, b) {
  const ids = (i) => i.called_incidents.map((x) => x.id).join(',');
  return ids(a) !== ids(b);
}

// legend says what the diagram's marks mean, in words beside their look.
function legend() {
  const key = (cls, text) => h('li', {}, h('span', { class: `swatch ${cls}`, 'aria-hidden': 'true' }), text);
  return h('ul', { class: 'legend', 'aria-label': 'Legend of the diagram' },
    key('sutra-passed', 'Passed: the elements and flows the steps listed in the history took (their Path column)'),
    key('sutra-waiting', 'Waits here'),
    key('sutra-incident', 'Stopped by an incident (here, or in an instance it called)'));
}

// stepHistory shows an instance's steps, newest first, from
// GET /v1/instances/{id}/history: what advanced it, when, under which
// owner, and the path it took. reload shows the newest page again; older
// pages are added below. onPassed receives the ids every step listed
// passed, after each load.
function stepHistory(el, path, onPassed) {
  const rows = h('tbody', {});
  const more = h('p', {});
  let passed = new Set();
  const row = (s) => h('tr', { 'data-step': s.version },
    h('td', {}, s.version), h('td', {}, time(s.committed_at)), h('td', {}, h('strong', {}, s.cause)), h('td', {}, s.detail),
    h('td', { class: 'path' }, s.passed.join(' → ') + (s.passed_cut ? ' … (cut: the step passed more)' : '')),
    h('td', {}, s.owner), h('td', {}, s.message_id || ''), h('td', {}, s.bounces === null ? '' : s.bounces));
  const load = async (after) => {
    const p = await api('GET', `${path}/history${query({ limit: historyPage, after })}`);
    if (!after) {
      rows.replaceChildren();
      passed = new Set();
    }
    for (const s of p.steps) {
      rows.append(row(s));
      for (const id of s.passed) passed.add(id);
    }
    if (!rows.children.length) rows.append(h('tr', {}, h('td', { colspan: 8, class: 'empty' }, 'No step recorded (older steps are trimmed).')));
    fill(more, p.next ? button('Older steps', () => load(p.next)) : null);
    onPassed(passed);
  };
  fill(el, h('table', {},
    h('caption', {}, 'Steps, newest first: what advanced the instance, the path it took, and under which claim'),
    h('thead', {}, h('tr', {}, ['Step', 'Committed', 'Cause', 'Detail', 'Path', 'Owner', 'Relay', 'Claim bounces'].map((c) => h('th', { scope: 'col' }, c)))),
    rows), more);
  return { reload: () => load() };
}
