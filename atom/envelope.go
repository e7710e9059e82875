package atom

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"

	"github.com/sbgate/sbgate/broker"
)

// decodeEnvelope walks a PUT body and calls desc once for the description inside it, with the
// reader just past the description's start tag; desc must consume through the matching end tag.
// The body may be an Atom entry (any prefix, with or without an XML declaration) whose <content>
// holds the description, or the bare description element. want is the description's element
// name, used in errors; desc checks the name itself. A body without any element, an entry
// without content and an empty content never call desc.
//
// It returns a *broker.Error with CodeBadRequest for a body over 1 MiB, malformed XML, a root that
// is neither an entry nor a description, more than one description in the content, text or
// elements after the root, and whatever desc returns.
func decodeEnvelope(body []byte, want string, desc func(r *reader, start xml.StartElement) error) error {
	if len(body) > maxBodySize {
		return broker.BadRequest("The request body is larger than %d bytes.", maxBodySize)
	}
	r := newReader(body)
	var root xml.StartElement
	for {
		tok, err := r.next()
		if err == io.EOF {
			return nil // no element at all: everything keeps its default
		}
		if err != nil {
			return err
		}
		if se, ok := tok.(xml.StartElement); ok {
			root = se
			break
		}
		if err := outsideRoot(tok); err != nil {
			return err
		}
	}
	var err error
	switch {
	case root.Name.Local == "entry":
		err = entry(r, desc)
	case strings.HasSuffix(root.Name.Local, "Description"):
		err = desc(r, root)
	default:
		err = broker.BadRequest("The request body must be an Atom entry or a %s, not a %s element.", want, broker.Clip(root.Name.Local))
	}
	if err != nil {
		return err
	}
	// Read to the end so that a truncated or trailing-garbage document is rejected rather than
	// half-applied.
	for {
		tok, err := r.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if _, ok := tok.(xml.StartElement); ok {
			return broker.BadRequest("The request body has more than one root element.")
		}
		if err := outsideRoot(tok); err != nil {
			return err
		}
	}
}

// outsideRoot accepts what may stand before or after the root element: the XML declaration,
// comments, a DOCTYPE (encoding/xml never expands its entities) and white space.
func outsideRoot(tok xml.Token) error {
	if cd, ok := tok.(xml.CharData); ok && len(bytes.TrimSpace(cd)) != 0 {
		return broker.BadRequest("The request body has text outside its root element.")
	}
	return nil
}

// entry reads an Atom entry's children, looking for <content>; <updated>, <title> and the rest
// are ignored.
func entry(r *reader, desc func(r *reader, start xml.StartElement) error) error {
	for {
		tok, err := r.next()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "content" {
				err = content(r, desc)
			} else {
				err = r.skip()
			}
			if err != nil {
				return err
			}
		case xml.EndElement:
			return nil
		}
	}
}

func content(r *reader, desc func(r *reader, start xml.StartElement) error) error {
	found := false
	for {
		tok, err := r.next()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if found {
				return broker.BadRequest("The entry content holds more than one description.")
			}
			found = true
			if err := desc(r, t); err != nil {
				return err
			}
		case xml.EndElement:
			return nil
		}
	}
}
