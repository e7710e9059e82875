package atom

import "encoding/xml"

// encoding/xml resolves the prefixes of element and attribute names but not those inside
// attribute values, and typed rule values carry a QName there: i:type="d6p1:int" with d6p1 bound
// to the XML Schema namespace. Clients pick any prefix (l28, d5p1, d6p1, ...), so the reader keeps
// its own record of the prefixed declarations in scope to resolve them.

// nsBinding undoes one xmlns:prefix="uri" declaration made by the element at depth: it holds
// the binding the declaration shadowed.
type nsBinding struct {
	prefix, prev string
	hadPrev      bool
	depth        int
}

// declare records the prefixed namespace declarations of the element just opened at r.depth.
// encoding/xml leaves their attribute names as {Space: "xmlns", Local: prefix}. Default namespace
// declarations are not recorded: an unprefixed QName in a value is read leniently (see
// valueKindOf), not by the default namespace. Lookups go through a map so that a hostile body
// with thousands of declarations cannot make each value's lookup slow.
func (r *reader) declare(se xml.StartElement) {
	for _, a := range se.Attr {
		if a.Name.Space != "xmlns" {
			continue
		}
		if r.scope == nil {
			r.scope = make(map[string]string)
		}
		prev, had := r.scope[a.Name.Local]
		r.ns = append(r.ns, nsBinding{prefix: a.Name.Local, prev: prev, hadPrev: had, depth: r.depth})
		r.scope[a.Name.Local] = a.Value
	}
}

// release drops the declarations of the element just closed, restoring what they shadowed.
func (r *reader) release() {
	for len(r.ns) > 0 && r.ns[len(r.ns)-1].depth > r.depth {
		b := r.ns[len(r.ns)-1]
		r.ns = r.ns[:len(r.ns)-1]
		if b.hadPrev {
			r.scope[b.prefix] = b.prev
		} else {
			delete(r.scope, b.prefix)
		}
	}
}

// lookupPrefix returns the namespace URI prefix is bound to at the current position: inside an
// element, after its start tag and before its end tag, its own declarations count.
func (r *reader) lookupPrefix(prefix string) (string, bool) {
	uri, ok := r.scope[prefix]
	return uri, ok
}
