// User tasks (Tasklist): the list with filters; a task with claim and
// assign, its Camunda Form rendered by form-js (or a JSON editor when it
// names none), and completion.
import { Form } from '@bpmn-io/form-js';
import { h, fill, api, link, table, notice, button, query, go, time, pretty, session, autoRefresh, ApiError } from './lib.js';

export async function tasksPage(main, params, page) {
  const get = (k) => params.get(k) || '';
  const inputs = {
    assignee: h('input', { name: 'assignee', value: get('assignee') }),
    assigned: h('select', { name: 'assigned' }, [['', 'any'], ['false', 'unassigned'], ['true', 'assigned']].map(([v, l]) =>
      h('option', { value: v, selected: v === get('assigned') }, l))),
    candidate_group: h('input', { name: 'candidate_group', value: get('candidate_group') }),
    candidate_user: h('input', { name: 'candidate_user', value: get('candidate_user') }),
    state: h('select', { name: 'state' }, [['', 'any'], ['created', 'open'], ['completing', 'completing']].map(([v, l]) =>
      h('option', { value: v, selected: v === get('state') }, l))),
  };
  const form = h('form', {
    class: 'filters',
    onsubmit: (e) => {
      e.preventDefault();
      go(`/ui/tasks${query(Object.fromEntries(Object.entries(inputs).map(([k, i]) => [k, i.value])))}`);
    },
  },
  h('label', {}, 'Assignee ', inputs.assignee), h('label', {}, 'Assigned ', inputs.assigned),
  h('label', {}, 'Candidate group ', inputs.candidate_group),
  h('label', {}, 'Candidate user ', inputs.candidate_user), h('label', {}, 'State ', inputs.state),
  h('button', { type: 'submit' }, 'Filter'),
  h('button', { type: 'button', onclick: () => go(`/ui/tasks${query({ assigned: 'false', state: 'created' })}`) }, 'Unassigned'),
  session.user ? h('button', { type: 'button', onclick: () => go(`/ui/tasks${query({ assignee: session.user })}`) }, 'Assigned to me') : null);
  const q = Object.fromEntries(Object.keys(inputs).map((k) => [k, params.get(k)]));
  q.after = params.get('after');
  const list = h('div', {});
  const refresh = async () => {
    const { user_tasks: tasks, next } = await api('GET', `/v1/user-tasks${query(q)}`);
    fill(list, table('User tasks', [
      ['Task', (t) => h('span', { title: t.element }, link(`/ui/tasks/${t.id}`, `${t.name || t.element} #${t.id}`))],
      ['Process', (t) => h('span', { title: t.definition.key }, `${t.process_name || t.definition.key} v${t.definition.version}`)],
      ['Assignee', (t) => t.assignee || ''],
      ['Candidates', (t) => [...t.candidate_groups, ...t.candidate_users].join(', ')],
      ['Priority', (t) => t.priority],
      ['Due', (t) => (t.due_date ? time(t.due_date) : '')],
      ['Created', (t) => time(t.created_at)],
    ], tasks),
    next ? h('p', {}, link(`/ui/tasks${query({ ...q, after: next })}`, 'Next page →')) : null);
  };
  await refresh();
  fill(main, h('h1', {}, 'User tasks'), form, autoRefresh(page, 5000, refresh), list);
}

// taskPage shows user task id; said, when given, is the outcome of the
// action that showed it again.
export async function taskPage(main, id, said) {
  const path = `/v1/user-tasks/${encodeURIComponent(id)}`;
  const task = await api('GET', path);
  const out = h('div', { 'aria-live': 'polite' }, said ? notice('ok', said) : null);
  const assignee = h('input', { id: 'assignee', value: task.assignee || session.user });
  const formBox = h('div', { class: 'form' });
  // A task with assigning listeners answers 202 {state: assigning}: the
  // assignment takes effect once their jobs are done.
  // The page is drawn again from the task as the API then answers it: its
  // assignee and the actions that follow from it.
  const assign = async (to, done) => {
    const r = await api('POST', `${path}/assignment`, { assignee: to });
    await taskPage(main, id, r && r.state === 'assigning'
      ? 'Assignment recorded: it takes effect once the task\'s assigning listeners are done.' : done);
    return '';
  };
  const complete = async (variables) => {
    await api('POST', `${path}/completion`, { variables, override: session.admin && !!task.assignee && task.assignee !== session.user });
    fill(main, h('h1', {}, `User task ${task.name || task.element} #${task.id}`),
      notice('ok', 'Completion recorded: the task is completing until the instance applies it, after its completing listeners, if any.'),
      h('p', {}, link('/ui/tasks', 'Back to the user tasks')));
  };
  fill(main, 
    h('h1', {}, `User task ${task.name || task.element} #${task.id}`),
    h('p', {}, 'Instance ', session.admin ? link(`/ui/instances/${encodeURIComponent(task.instance_id)}`, task.instance_id) : task.instance_id,
      ` · ${task.process_name || task.definition.key} v${task.definition.version} · priority ${task.priority}`,
      task.due_date ? [' · due ', time(task.due_date)] : '', ` · ${task.state}`),
    h('p', {}, 'Assignee: ', h('strong', { id: 'current-assignee' }, task.assignee || 'nobody'),
      task.candidate_groups.length ? ` · groups ${task.candidate_groups.join(', ')}` : '',
      task.candidate_users.length ? ` · users ${task.candidate_users.join(', ')}` : ''),
    h('p', { class: 'toolbar' },
      h('label', { for: 'assignee' }, 'Assign to '), assignee, ' ',
      button('Assign', async () => assign(assignee.value || null, `Assigned to ${assignee.value || 'nobody'}.`), out),
      session.user && task.assignee !== session.user ? button(`Claim as ${session.user}`,
        async () => assign(session.user, `Claimed by ${session.user}.`), out) : null,
      task.assignee ? button('Unassign', async () => assign(null, 'Unassigned.'), out) : null),
    out,
    // The variables stay beside the form while it is filled in.
    h('div', { class: 'beside' },
      h('div', {}, h('h2', {}, 'Form'), formBox),
      h('aside', { 'aria-labelledby': 'task-variables' }, h('h2', { id: 'task-variables' }, 'Variables'),
        table("The task's variables", [['Name', ([k]) => k], ['Value', ([, v]) => h('code', {}, JSON.stringify(v))]],
          Object.entries(task.variables)))));

  let schema = null;
  if (task.form_key) {
    try {
      schema = await api('GET', `${path}/form`);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
    }
  }
  if (schema) {
    const container = h('div', {});
    fill(formBox, container, h('p', {}, h('button', { type: 'button', id: 'complete', onclick: () => form.submit() }, 'Complete')));
    const form = new Form({ container });
    await form.importSchema(schema, task.variables);
    form.on('submit', async ({ data, errors }) => {
      if (Object.keys(errors).length) {
        fill(out, notice('error', 'The form has errors: see the fields marked.'));
        return;
      }
      try {
        await complete(data);
      } catch (e) {
        fill(out, notice('error', e.message));
      }
    });
    return;
  }
  const area = h('textarea', { id: 'result', rows: 10, cols: 60 }, pretty({}));
  fill(formBox, 
    notice('info', task.form_id ? `This task names form ${task.form_id}, deployed apart from its process: set its variables as JSON.`
      : 'This task names no form: set its variables as JSON.'),
    h('details', {}, h('summary', {}, 'Its variables'), h('pre', {}, pretty(task.variables))),
    h('label', { for: 'result' }, 'Variables to complete with (a JSON object)'), area,
    h('p', {}, button('Complete', async () => {
      let vars;
      try { vars = JSON.parse(area.value); } catch (e) { throw new Error(`not JSON: ${e.message}`); }
      await complete(vars);
      return '';
    }, out, { id: 'complete' })));
}
