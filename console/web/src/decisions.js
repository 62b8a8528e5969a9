// Decisions: the deployed decisions; a decision's table drawn by dmn-js
// (read only), and a form that evaluates it with inputs through
// POST /v1/decisions/{id}/evaluation, marking the rules that matched.
//
// Only dmn-js's decision table viewer is bundled (not its DRD, literal
// expression or boxed expression views, nor any editor): what this page
// draws is a table, and the JavaScript budget is 1.5 MB gzipped.
import Manager from 'dmn-js-shared/lib/base/Manager';
import DecisionTableViewer from 'dmn-js-decision-table/lib/Viewer';
import { is } from 'dmn-js-shared/lib/util/ModelUtil';
import 'dmn-js/dist/assets/dmn-js-shared.css';
import 'dmn-js/dist/assets/dmn-js-decision-table.css';
import './decisions.css';
import { h, fill, api, link, table, query, notice, button, time, pretty, go } from './lib.js';

// TableViewer is dmn-js's viewer with its decision table view alone.
class TableViewer extends Manager {
  _getViewProviders() {
    return [{
      id: 'decisionTable',
      constructor: DecisionTableViewer,
      opens: (element) => is(element, 'dmn:Decision') && is(element.decisionLogic, 'dmn:DecisionTable'),
    }];
  }
}

export async function decisionsPage(main, params) {
  const after = params.get('after');
  const { decisions, next } = await api('GET', `/v1/decisions${query({ after })}`);
  fill(main,
    h('h1', {}, 'Decisions'),
    table('Deployed decisions, by decision id and version', [
      ['Decision', (d) => link(`/ui/decisions/${encodeURIComponent(d.decision_id)}?version=${d.version}`, d.decision_id)],
      ['Name', (d) => d.name],
      ['Version', (d) => d.version],
      ['Version tag', (d) => d.version_tag || ''],
      ['Deployed', (d) => time(d.deployed_at)],
    ], decisions),
    next ? h('p', {}, link(`/ui/decisions${query({ after: next })}`, 'Next page →')) : null);
}

export async function decisionPage(main, id, params, page) {
  // The versions of id come first from the cursor just before its first
  // (its first 500: a page's most).
  const { decisions } = await api('GET', `/v1/decisions${query({ after: `${id}:0`, limit: 500 })}`);
  const versions = decisions.filter((d) => d.decision_id === id);
  if (!versions.length) throw new Error(`no decision ${id} is deployed`);
  const version = Number(params.get('version')) || versions[versions.length - 1].version;
  const shown = versions.find((d) => d.version === version);
  if (!shown) throw new Error(`decision ${id} has no version ${version}`);
  const path = `/ui/decisions/${encodeURIComponent(id)}`;
  const select = h('select', {
    id: 'version',
    onchange: () => go(`${path}?version=${select.value}`),
  }, versions.map((d) => h('option', { value: d.version, selected: d.version === version }, `version ${d.version}`)));
  const drawing = h('div', { class: 'decision-table' });
  const variables = h('textarea', { id: 'variables', rows: 8, cols: 60 });
  const out = h('div', { id: 'evaluation', 'aria-live': 'polite' });
  fill(main,
    h('h1', {}, `Decision ${shown.name || id}`),
    h('p', { class: 'toolbar' }, h('label', { for: 'version' }, 'Version '), select,
      ` · id ${id}`, shown.version_tag ? ` · tag ${shown.version_tag}` : '', ' · deployed ', time(shown.deployed_at)),
    drawing,
    h('h2', {}, 'Evaluate'),
    h('label', { for: 'variables' }, 'Variables (a JSON object: the input data by name)'), variables,
    h('p', {}, button('Evaluate', async () => {
      let vars;
      try { vars = JSON.parse(variables.value || '{}'); } catch (e) { throw new Error(`not JSON: ${e.message}`); }
      const ev = await api('POST', `/v1/decisions/${encodeURIComponent(id)}/evaluation`, { variables: vars, version });
      showEvaluation(out, drawing, id, ev);
      return '';
    }, out, { id: 'evaluate' })),
    out);

  const xml = await api('GET', `/v1/decisions/${encodeURIComponent(id)}/versions/${version}`);
  variables.value = pretty(Object.fromEntries(inputNames(xml).map((n) => [n, null])));
  const viewer = new TableViewer({ container: drawing });
  page.onLeave(() => viewer.destroy());
  try {
    await viewer.importXML(xml);
  } catch (e) {
    // A file of literal expressions alone has no table to draw.
    if (e.message !== 'no displayable contents') throw e;
  }
  const view = viewer.getViews().find((v) => v.element.id === id);
  if (!view) {
    fill(drawing, notice('info', `Decision ${id} is not a decision table: there is no table to draw.`),
      h('pre', {}, literalText(xml, id)));
    return;
  }
  await viewer.open(view);
}

// showEvaluation shows an evaluation's output and the decisions evaluated,
// and marks the rules of the drawn table that matched.
function showEvaluation(out, drawing, id, ev) {
  for (const cell of drawing.querySelectorAll('.sutra-matched')) cell.classList.remove('sutra-matched');
  const own = ev.decisions.find((d) => d.decision_id === id);
  for (const r of own ? own.matched_rules : []) {
    for (const cell of drawing.querySelectorAll(`[data-row-id="${CSS.escape(r.rule_id)}"]`)) cell.classList.add('sutra-matched');
  }
  fill(out,
    h('h3', {}, 'Output'),
    h('pre', { id: 'output' }, pretty(ev.output)),
    table('Decisions evaluated, required ones first', [
      ['Decision', (d) => `${d.name || d.decision_id} (v${d.version})`],
      ['Inputs', (d) => d.inputs.map((i) => `${i.name} = ${JSON.stringify(i.value)}`).join('; ')],
      ['Matched rules', (d) => d.matched_rules.map((r) => `#${r.index} ${r.rule_id} → ${JSON.stringify(r.outputs)}`).join('; ')],
      ['Output', (d) => JSON.stringify(d.output)],
    ], ev.decisions));
}

// inputNames are the names the file's tables read that no decision of it
// answers: the input data a caller gives, to prefill the form with.
function inputNames(xml) {
  const doc = new DOMParser().parseFromString(xml, 'application/xml');
  const decided = new Set([...doc.getElementsByTagNameNS('*', 'decision')].flatMap((d) => [d.getAttribute('id'), d.getAttribute('name')]));
  const names = new Set();
  for (const e of doc.getElementsByTagNameNS('*', 'inputExpression')) {
    const text = (e.textContent || '').trim();
    if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(text) && !decided.has(text)) names.add(text);
  }
  return [...names];
}

// literalText is the expression of a literal expression decision.
function literalText(xml, id) {
  const doc = new DOMParser().parseFromString(xml, 'application/xml');
  const dec = [...doc.getElementsByTagNameNS('*', 'decision')].find((d) => d.getAttribute('id') === id);
  const text = dec && dec.getElementsByTagNameNS('*', 'text')[0];
  return text ? text.textContent.trim() : '';
}
