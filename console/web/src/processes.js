// Processes: the deployed definitions and their versions; a version's
// diagram with, on each element, the tokens of active instances there and
// the open incidents raised there (Operate's heatmap).
import { h, fill, api, link, table, query, go } from './lib.js';
import { Diagram } from './diagram.js';

export async function processesPage(main) {
  const { definitions } = await api('GET', '/v1/definitions');
  fill(main, 
    h('h1', {}, 'Processes'),
    table('Deployed definitions', [
      ['Process', (d) => link(`/ui/processes/${encodeURIComponent(d.key)}`, d.key)],
      ['Versions', (d) => d.versions.map((v, i) => [i ? ', ' : '',
        link(`/ui/processes/${encodeURIComponent(d.key)}?version=${v}`, String(v))])],
      ['Latest', (d) => d.latest],
      ['Instances', (d) => link(`/ui/instances${query({ definition: d.key, status: 'active' })}`, 'active instances')],
    ], definitions));
}

export async function processPage(main, key, params, page) {
  const { definitions } = await api('GET', '/v1/definitions');
  const def = definitions.find((d) => d.key === key);
  if (!def) throw new Error(`no process ${key} is deployed`);
  const version = Number(params.get('version')) || def.latest;
  const select = h('select', {
    id: 'version',
    onchange: () => go(`/ui/processes/${encodeURIComponent(key)}?version=${select.value}`),
  }, def.versions.map((v) => h('option', { value: v, selected: v === version }, `version ${v}`)));
  const canvas = h('div', { class: 'diagram', role: 'img', 'aria-label': `Diagram of ${key} version ${version}` });
  const counts = h('div', {});
  fill(main, 
    h('h1', {}, `Process ${key}`),
    h('p', { class: 'toolbar' },
      h('label', { for: 'version' }, 'Version '), select, ' ',
      link(`/ui/instances${query({ definition: key, version })}`, 'Instances of this version')),
    canvas, counts);
  const diagram = new Diagram(canvas);
  page.onLeave(() => diagram.destroy());
  await diagram.show(await api('GET', `/v1/definitions/${encodeURIComponent(key)}/versions/${version}`));
  // The counts come a page of active instances at a time: the diagram
  // fills in as they are summed.
  const refresh = async () => {
    const sum = {};
    let instances = 0;
    let after = '';
    do {
      const r = await api('GET', `/v1/definitions/${encodeURIComponent(key)}/versions/${version}/statistics${query({ after })}`);
      for (const e of r.elements) {
        const c = (sum[e.element] ||= { element: e.element, active: 0, incidents: 0 });
        c.active += e.active;
        c.incidents += e.incidents;
      }
      instances += r.instances;
      after = r.next;
      if (page.left) return;
      diagram.badges(sum);
      fill(counts, table(`Where the ${instances} active instances are${after ? ' (counting…)' : ''}`, [
        ['Element', (e) => diagram.label(e.element)],
        ['Active tokens', (e) => e.active],
        ['Open incidents', (e) => e.incidents],
      ], Object.values(sum)));
    } while (after);
  };
  await refresh();
  page.every(15000, refresh);
}
