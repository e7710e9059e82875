package atom

import (
	"encoding/xml"
	"io"
	"strings"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// DescriptionKind tells what a PUT body describes, so the caller knows which entity to create
// at a path that could hold any: a QueueDescription is a queue, a TopicDescription a topic, a
// SubscriptionDescription a subscription. A body without a description (empty, or an entry
// without content) is a queue with every default, which is what `curl -X PUT .../name` means.
// It returns a *broker.Error with CodeBadRequest for malformed XML or another description type.
func DescriptionKind(body []byte) (broker.Kind, error) {
	if len(body) > maxBodySize {
		return 0, broker.BadRequest("The request body is larger than %d bytes.", maxBodySize)
	}
	r := newReader(body)
	for {
		tok, err := r.next()
		if err == io.EOF {
			return broker.KindQueue, nil
		}
		if err != nil {
			return 0, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch name := se.Name.Local; {
		case name == "entry" || name == "content":
			continue // descend: the description is inside
		case name == "QueueDescription":
			return broker.KindQueue, nil
		case name == "TopicDescription":
			return broker.KindTopic, nil
		case name == "SubscriptionDescription":
			return broker.KindSubscription, nil
		case strings.HasSuffix(name, "Description"):
			return 0, broker.BadRequest("A %s cannot be put here; send a QueueDescription or TopicDescription.", broker.Clip(name))
		default:
			if err := r.skip(); err != nil { // <updated>, <title>, ...
				return 0, err
			}
		}
	}
}

// AppendNamespaceInfo appends the entry GET /$namespaceinfo returns: a Standard messaging
// namespace named name, created at created.
func AppendNamespaceInfo(dst []byte, id, name string, created time.Time) []byte {
	dst = append(dst, `<entry xmlns="`+nsAtom+`"><id>`...)
	dst = appendEscaped(dst, id, false)
	dst = append(dst, `</id><title type="text">`...)
	dst = appendEscaped(dst, name, false)
	dst = append(dst, `</title><updated>`...)
	dst = created.UTC().AppendFormat(dst, atomTimeLayout)
	dst = append(dst, `</updated><author><name>`...)
	dst = appendEscaped(dst, name, false)
	dst = append(dst, `</name></author><content type="application/xml"><NamespaceInfo`+descAttrs...)
	dst = appendTimeElem(dst, "CreatedTime", created)
	dst = appendTextElem(dst, "MessagingSKU", "Standard")
	dst = appendTimeElem(dst, "ModifiedTime", created)
	dst = appendTextElem(dst, "Name", name)
	dst = appendTextElem(dst, "NamespaceType", "Messaging")
	return append(dst, "</NamespaceInfo></content></entry>"...)
}
