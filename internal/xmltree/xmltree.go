// Package xmltree reads an XML document into a tree of elements under caps
// on its size, the one reader of the bpmn and dmn parsers. They walk a tree
// rather than decode into structs so that they can refuse any element they
// do not know, by name and id.
package xmltree

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Node is one XML element.
type Node struct {
	Name  xml.Name
	Attrs []xml.Attr
	Kids  []*Node
	Text  strings.Builder
}

// Attr returns the value of the unqualified attribute local, or "".
func (n *Node) Attr(local string) string { return n.AttrNS("", local) }

// AttrNS returns the value of the attribute local in namespace space, or "".
func (n *Node) AttrNS(space, local string) string {
	for _, a := range n.Attrs {
		if a.Name.Space == space && a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// Is tells whether n is the element local of namespace space.
func (n *Node) Is(space, local string) bool {
	return n.Name.Space == space && n.Name.Local == local
}

// Child returns the first child named local in n's own namespace, or nil.
// A nil n has no children.
func (n *Node) Child(local string) *Node {
	if n == nil {
		return nil
	}
	for _, k := range n.Kids {
		if k.Is(n.Name.Space, local) {
			return k
		}
	}
	return nil
}

// Children returns the children named local in n's own namespace.
func (n *Node) Children(local string) []*Node {
	var out []*Node
	for _, k := range n.Kids {
		if k.Is(n.Name.Space, local) {
			out = append(out, k)
		}
	}
	return out
}

// Caps bound a document; the zero value of a field is no cap. Package names
// the caller's constants in the refusals ("bpmn" gives "bpmn.MaxDepth").
type Caps struct {
	Package               string
	MaxBytes              int64
	MaxDepth, MaxElements int
}

// Read reads the whole document into a tree, refusing one past a cap as
// soon as it gets there, so that a hostile document costs no more memory
// than the caps allow.
func Read(r io.Reader, caps Caps) (*Node, error) {
	lr := &io.LimitedReader{R: r, N: caps.MaxBytes + 1}
	if caps.MaxBytes > 0 {
		r = lr
	}
	d := xml.NewDecoder(r)
	var root *Node
	var stack []*Node
	elements := 0
	for {
		tok, err := d.Token()
		if caps.MaxBytes > 0 && lr.N <= 0 {
			return nil, fmt.Errorf("the document is larger than %d bytes (the parser's cap, %s.MaxBytes)", caps.MaxBytes, caps.Package)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if elements++; caps.MaxElements > 0 && elements > caps.MaxElements {
				return nil, fmt.Errorf("the document holds more than %d elements (the parser's cap, %s.MaxElements)", caps.MaxElements, caps.Package)
			}
			if caps.MaxDepth > 0 && len(stack) >= caps.MaxDepth {
				return nil, fmt.Errorf("<%s> nests deeper than %d elements (the parser's cap, %s.MaxDepth)", t.Name.Local, caps.MaxDepth, caps.Package)
			}
			n := &Node{Name: t.Name, Attrs: t.Attr}
			if len(stack) == 0 {
				if root != nil {
					return nil, errors.New("more than one root element")
				}
				root = n
			} else {
				parent := stack[len(stack)-1]
				parent.Kids = append(parent.Kids, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].Text.Write(t)
			}
		}
	}
	if root == nil {
		return nil, errors.New("no root element")
	}
	return root, nil
}
