package atom

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"

	"github.com/sbgate/sbgate/broker"
)

// reader is an encoding/xml token stream with a nesting limit. Every token of a body goes through
// next, including the ones of skipped elements, so no input can nest deeper than maxDepth.
type reader struct {
	d     *xml.Decoder
	depth int
	// Prefixed namespace declarations in scope (see lookupPrefix): scope maps each prefix to its
	// URI, ns holds what to undo when the declaring element ends.
	scope map[string]string
	ns    []nsBinding
}

func newReader(body []byte) *reader {
	return &reader{d: xml.NewDecoder(bytes.NewReader(body))}
}

// next returns the next token, namespace-resolved (Name.Space holds the URI, whatever the
// prefix). At the end of the input, outside every element, it returns io.EOF; every other error
// is a *broker.Error with CodeBadRequest, so callers inside an element can return it as it is.
// CharData is only valid until the following call.
func (r *reader) next() (xml.Token, error) {
	tok, err := r.d.Token()
	if err != nil {
		if err == io.EOF {
			if r.depth > 0 {
				return nil, broker.BadRequest("The request body is not well-formed XML: it ends inside an element.")
			}
			return nil, io.EOF
		}
		var syn *xml.SyntaxError
		if errors.As(err, &syn) {
			return nil, broker.BadRequest("The request body is not well-formed XML: line %d: %s.", syn.Line, broker.Clip(syn.Msg))
		}
		return nil, broker.BadRequest("The request body is not well-formed XML: %s.", broker.Clip(err.Error()))
	}
	switch t := tok.(type) {
	case xml.StartElement:
		r.depth++
		if r.depth > maxDepth {
			return nil, broker.BadRequest("The request body nests elements deeper than %d levels.", maxDepth)
		}
		r.declare(t)
	case xml.EndElement:
		r.depth--
		r.release()
	}
	return tok, nil
}

// skip consumes the rest of the element whose start tag was just read.
func (r *reader) skip() error {
	for open := 1; open > 0; {
		tok, err := r.next()
		if err != nil {
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			open++
		case xml.EndElement:
			open--
		}
	}
	return nil
}

// text returns the character data of the element named name, whose start tag was just read,
// and consumes its end tag. Comments are ignored; a child element is a bad request, since every
// element read as text is a simple value.
func (r *reader) text(name string) (string, error) {
	var sb strings.Builder
	for {
		tok, err := r.next()
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.CharData:
			sb.Write(t)
		case xml.StartElement:
			return "", broker.BadRequest("Element %s must hold a value, not a %s element.", name, broker.Clip(t.Name.Local))
		case xml.EndElement:
			return sb.String(), nil
		}
	}
}
