package dmn

import "strings"

// nsZeebe is the namespace of Camunda 8's extensions.
const nsZeebe = "http://camunda.org/schema/zeebe/1.0"

// IsDMN reports whether an XML root element named local in namespace space
// is the definitions of a DMN version Parse reads: how a deploy tells a DMN
// file from a BPMN one.
func IsDMN(space, local string) bool {
	_, ok := versions[space]
	return ok && local == "definitions"
}

// versionTag is the zeebe:versionTag a Camunda 8 Modeler writes into a
// decision's extension elements, or "".
func versionTag(n *node) string {
	x := n.Child("extensionElements")
	if x == nil {
		return ""
	}
	for _, k := range x.Kids {
		if k.Is(nsZeebe, "versionTag") {
			return strings.TrimSpace(k.Attr("value"))
		}
	}
	return ""
}
