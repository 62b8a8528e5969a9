// A BPMN diagram drawn by bpmn-js (the renderer Camunda's Modeler and
// Operate use), with Sutra's markers and counts on its elements.
import NavigatedViewer from 'bpmn-js/lib/NavigatedViewer';
import { h } from './lib.js';

export class Diagram {
  constructor(container) {
    this.viewer = new NavigatedViewer({ container });
    this.markers = [];
  }

  async show(xml) {
    await this.viewer.importXML(xml);
    this.markers = []; // a new diagram has none (and may lack the old ones' elements)
    this.viewer.get('canvas').zoom('fit-viewport', 'auto');
  }

  // name is element id's name in the diagram ("" when it has none or is
  // not there).
  name(id) {
    const e = this.viewer.get('elementRegistry').get(id);
    return (e && e.businessObject && e.businessObject.name) || '';
  }

  // label shows element id by its name, its id on hover (the id alone
  // when it has no name).
  label(id) {
    const name = this.name(id);
    return name ? h('span', { title: id, 'data-element': id }, name) : h('span', { 'data-element': id }, id);
  }

  // flowNodes are the process-level elements a flow can reach (what an
  // instance modification activates), by id and name.
  flowNodes() {
    const root = this.viewer.get('canvas').getRootElement();
    return this.viewer.get('elementRegistry').filter((e) => e.parent === root && !e.labelTarget && !e.waypoints
      && e.businessObject && e.businessObject.$instanceOf('bpmn:FlowNode') && e.type !== 'bpmn:BoundaryEvent'
      && !(e.type === 'bpmn:SubProcess' && e.businessObject.triggeredByEvent))
      .map((e) => ({ id: e.id, name: e.businessObject.name || '' }));
  }

  has(id) {
    return !!this.viewer.get('elementRegistry').get(id);
  }

  // mark sets each element's marker classes, replacing the previous ones.
  mark(byElement) {
    const canvas = this.viewer.get('canvas');
    for (const [id, cls] of this.markers) canvas.removeMarker(id, cls);
    this.markers = [];
    for (const [id, classes] of Object.entries(byElement)) {
      if (!this.has(id)) continue;
      for (const cls of classes) {
        canvas.addMarker(id, cls);
        this.markers.push([id, cls]);
      }
    }
  }

  // badges replaces the count badges: {element: {active, incidents}},
  // each named by its element's name, the id on hover.
  badges(counts) {
    const overlays = this.viewer.get('overlays');
    overlays.remove({ type: 'sutra-count' });
    for (const [id, c] of Object.entries(counts)) {
      if (!this.has(id)) continue;
      const name = this.name(id);
      const of = name ? `${name} (id ${id})` : id;
      const badge = h('div', { class: 'badges', 'data-element': id, 'data-name': name || id },
        c.active ? h('span', { class: 'badge active', title: `${of}: ${c.active} active token(s)`,
          'aria-label': `${name || id}: ${c.active} active token(s)` }, c.active) : null,
        c.incidents ? h('span', { class: 'badge incident', title: `${of}: ${c.incidents} open incident(s)`,
          'aria-label': `${name || id}: ${c.incidents} open incident(s)` }, c.incidents) : null);
      overlays.add(id, 'sutra-count', { position: { bottom: 10, left: -10 }, html: badge });
    }
  }

  destroy() {
    this.viewer.destroy();
  }
}
