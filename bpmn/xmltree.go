package bpmn

import "github.com/sutra-run/worker/internal/xmltree"

// Namespaces of the elements the parser reads; everything is matched by
// namespace URI, never by prefix, because files choose their own prefixes.
const (
	nsBPMN  = "http://www.omg.org/spec/BPMN/20100524/MODEL"
	nsZeebe = "http://camunda.org/schema/zeebe/1.0"
	nsXSI   = "http://www.w3.org/2001/XMLSchema-instance"
	// nsModeler carries Camunda Modeler's executionPlatform attribute.
	nsModeler = "http://camunda.org/schema/modeler/1.0"
	// nsCamunda7 is the extension namespace of Camunda 7 files.
	nsCamunda7 = "http://camunda.org/schema/1.0/bpmn"
)

// node is one XML element. The parser walks a tree rather than decoding into
// structs so that it can refuse any element it does not know, by name and id.
type node = xmltree.Node

// The caps of a document, fixed rather than configured: a definition read
// again from the store must parse as it did at deploy. Modeler files stay far
// under both (nested subprocesses rarely pass depth 20; a file of 300
// processes with their diagrams holds some 10,000 elements), while the tree
// of a file past them costs memory out of proportion to its bytes (a 3.5 MB
// file nested 500,000 deep held 256 MB).
const (
	// MaxDepth caps how deeply a document's elements nest.
	MaxDepth = 100
	// MaxElements caps how many elements a document holds.
	MaxElements = 100_000
)

// caps are the caps for xmltree.Read.
var caps = xmltree.Caps{Package: "bpmn", MaxDepth: MaxDepth, MaxElements: MaxElements}
