// Incidents: the open ones grouped by process, code and element, each
// group retried at once; the process and the element by their names, their
// ids on hover.
import { h, fill, api, link, table, notice, button } from './lib.js';

// Open incidents read at most, in pages of 500.
const MAX = 5000;

export async function incidentsPage(main, page) {
  const out = h('div', { 'aria-live': 'polite' });
  const body = h('div', {});
  fill(main, h('h1', {}, 'Incidents'), out, body);
  const refresh = async () => {
    const all = [];
    let after = '';
    do {
      const r = await api('GET', `/v1/incidents?open=true&limit=500${after ? `&after=${after}` : ''}`);
      all.push(...r.incidents);
      after = r.next;
    } while (after && all.length < MAX);
    const groups = new Map();
    for (const x of all) {
      const process = x.definition ? `${x.definition.key} v${x.definition.version}` : '';
      const key = `${process}\u0000${x.code}\u0000${x.element}`;
      if (!groups.has(key)) {
        groups.set(key, { process, definition: x.definition, name: x.process_name, code: x.code, element: x.element,
          elementName: x.element_name, items: [] });
      }
      groups.get(key).items.push(x);
    }
    const rows = [...groups.values()].sort((a, b) => b.items.length - a.items.length);
    fill(body, 
      all.length >= MAX ? notice('info', `Showing the first ${MAX} open incidents.`) : null,
      table('Open incidents by process, code and element', [
        ['Process', (g) => (g.definition
          ? h('span', { title: g.process }, link(`/ui/processes/${encodeURIComponent(g.definition.key)}?version=${g.definition.version}`,
            g.name ? `${g.name} v${g.definition.version}` : g.process)) : '')],
        ['Code', (g) => g.code],
        ['Element', (g) => (g.elementName ? h('span', { title: g.element, 'data-element': g.element }, g.elementName)
          : h('span', { 'data-element': g.element }, g.element))],
        ['Count', (g) => g.items.length],
        ['Example', (g) => h('details', {}, h('summary', {}, g.items[0].message.slice(0, 80) || '(no message)'),
          h('ul', {}, g.items.slice(0, 20).map((x) => h('li', {},
            link(`/ui/instances/${encodeURIComponent(x.instance_id)}`, x.instance_id), ': ', x.message,
            x.error_message ? ` (the worker: ${x.error_message})` : ''))))],
        ['', (g) => button(`Retry ${g.items.length}`, async () => {
          let done = 0;
          const failed = [];
          for (const x of g.items) {
            try {
              await api('POST', `/v1/incidents/${x.id}/retry`, {});
              done++;
            } catch (e) {
              failed.push(`${x.instance_id}: ${e.message}`);
            }
            fill(out, notice('info', `Retried ${done} of ${g.items.length}…`));
          }
          await refresh();
          if (failed.length) throw new Error(`${done} retried, ${failed.length} refused: ${failed.slice(0, 3).join('; ')}`);
          return `${done} incident(s) retried.`;
        }, out)],
      ], rows));
  };
  await refresh();
  page.every(10000, refresh);
}
