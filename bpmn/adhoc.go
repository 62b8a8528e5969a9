package bpmn

import (
	"strings"
)

// adHocSubProcess reads an ad-hoc subprocess: its zeebe:adHoc, its
// completion condition and cancelRemainingInstances, its content and, when
// a job worker implements it (Zeebe 8.8), its zeebe:taskDefinition.
func (p *parser) adHocSubProcess(el *Element, n *node, x *extensions) error {
	el.Kind = KindAdHoc
	a := &AdHoc{CancelRemaining: n.Attr("cancelRemainingInstances") != "false"}
	if o := n.Attr("ordering"); o == "Sequential" {
		return unsupported(el.ID, el.Type, `ordering="Sequential" (Zeebe runs the activations of an ad-hoc subprocess side by side)`)
	}
	if z := x.take("adHoc"); z != nil {
		var err error
		if a.ActiveElements, err = optional(el.ID, "active elements collection", z.Attr("activeElementsCollection")); err != nil {
			return err
		}
		a.OutputCollection = strings.TrimSpace(z.Attr("outputCollection"))
		out := strings.TrimSpace(z.Attr("outputElement"))
		if (a.OutputCollection == "") != (out == "") {
			return invalid("ad-hoc subprocess %q needs both outputCollection and outputElement, or neither", el.ID)
		}
		if out != "" {
			if a.OutputElement, err = compile(el.ID, "output element", out); err != nil {
				return err
			}
		}
	}
	for _, k := range n.Kids {
		if k.Is(nsBPMN, "completionCondition") {
			if src := strings.TrimSpace(k.Text.String()); src != "" {
				c, err := compile(el.ID, "completion condition", src)
				if err != nil {
					return err
				}
				a.CompletionCondition = c
			}
		}
	}
	if x.has("taskDefinition") {
		if a.ActiveElements != nil || a.CompletionCondition != nil {
			// The worker's result chooses both; two sources would disagree.
			return invalid("ad-hoc subprocess %q has a zeebe:taskDefinition (its job worker chooses what to activate and when it completes) and an activeElementsCollection or completionCondition", el.ID)
		}
		n := x.take("taskDefinition")
		typ := strings.TrimSpace(n.Attr("type"))
		if typ == "" {
			return invalid("zeebe:taskDefinition of %q has no type", el.ID)
		}
		t, err := taskDefinition(el.ID, typ, strings.TrimSpace(n.Attr("retries")))
		if err != nil {
			return err
		}
		t.Headers = headers(x)
		el.Task = t
	}
	el.AdHoc = a
	if err := p.scope(n, el); err != nil {
		return err
	}
	for _, k := range n.Kids {
		id := k.Attr("id")
		child := p.proc.elements[id]
		if k.Name.Space != nsBPMN || child == nil || child.Parent != el {
			continue
		}
		act := AdHocActivity{Element: child}
		for _, m := range child.Inputs {
			if m.Source != nil {
				act.Parameters = append(act.Parameters, m.Source.AiParameters()...)
			}
		}
		for _, d := range k.Kids {
			switch {
			case d.Is(nsBPMN, "documentation"):
				act.Documentation = strings.TrimSpace(d.Text.String())
			case d.Is(nsBPMN, "extensionElements"):
				act.Properties = properties(d)
			}
		}
		a.Activities = append(a.Activities, act)
	}
	return nil
}

// properties reads the zeebe:properties of an extensionElements node (nil
// when none).
func properties(ext *node) map[string]string {
	var m map[string]string
	for _, z := range ext.Kids {
		if !z.Is(nsZeebe, "properties") {
			continue
		}
		for _, prop := range z.Kids {
			if prop.Is(nsZeebe, "property") {
				if m == nil {
					m = map[string]string{}
				}
				m[prop.Attr("name")] = prop.Attr("value")
			}
		}
	}
	return m
}

// validateAdHoc checks an ad-hoc subprocess once its flows are linked, as
// Zeebe does: no start or end event inside, no event subprocess (not run
// here), at least one activity; then keeps as activatable the flow nodes
// that no sequence flow enters.
func validateAdHoc(el *Element) error {
	if len(el.EventSubs) > 0 {
		return unsupported(el.EventSubs[0].ID, el.EventSubs[0].Type, "an event subprocess inside an ad-hoc subprocess")
	}
	activities := 0
	kept := el.AdHoc.Activities[:0]
	for _, a := range el.AdHoc.Activities {
		c := a.Element
		switch {
		case c.Kind == KindEnd || c.Kind == KindTerminateEnd || c.Kind == KindErrorEnd:
			return invalid("ad-hoc subprocess %q holds end event %q; its activations end where their flow ends", el.ID, c.ID)
		case isActivity(c):
			activities++
		}
		if len(c.Incoming) > 0 || c.Kind == KindBoundary || c.Kind == KindEventSubProcess || c.Type == "intermediateCatchEvent" && c.Kind == KindThrow {
			continue // reached by a flow, attached, or a link catch event
		}
		kept = append(kept, a)
	}
	if activities == 0 {
		return invalid("ad-hoc subprocess %q holds no activity", el.ID)
	}
	el.AdHoc.Activities = kept
	return nil
}
