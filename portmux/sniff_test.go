package portmux

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"testing/iotest"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		in         string
		tlsAllowed bool
		want       protocol
		decided    bool
	}{
		{"", true, 0, false},
		{"G", true, protoHTTP, true},
		{"GET / HTTP/1.1", true, protoHTTP, true},
		{"PRI * HTTP/2.0", true, protoHTTP, true},
		{"A", true, 0, false},
		{"AMQ", true, 0, false},
		{"AMQP", true, protoAMQP, true},
		{"AMQP\x00\x01\x00\x00", true, protoAMQP, true},
		{"AX", true, protoHTTP, true},
		{"AMX", true, protoHTTP, true},
		{"ACL / HTTP/1.1", true, protoHTTP, true},
		{"\x16", true, 0, false},
		{"\x16\x03", true, protoTLS, true},
		{"\x16\x03\x01\x02\x00", true, protoTLS, true},
		{"\x16\x01", true, protoHTTP, true},
		{"\x16\x03", false, protoHTTP, true},
	} {
		got, ok := classify([]byte(tc.in), tc.tlsAllowed)
		if got != tc.want || ok != tc.decided {
			t.Errorf("classify(%q, tls=%v) = %v, %v; want %v, %v", tc.in, tc.tlsAllowed, got, ok, tc.want, tc.decided)
		}
	}
}

// FuzzSniff: whatever a client sends, in whatever pieces, the sniffed bytes followed by the
// rest of the stream are exactly what it sent, and the decision is the one the first bytes
// call for.
func FuzzSniff(f *testing.F) {
	for _, s := range []string{"", "AMQP\x03\x01\x00\x00", "AMQ", "GET /", "\x16\x03\x01", "\x16", "A"} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, tlsAllowed bool) {
		for _, r := range []io.Reader{bytes.NewReader(in), iotest.OneByteReader(bytes.NewReader(in)), iotest.DataErrReader(bytes.NewReader(in))} {
			p, prefix, err := sniff(r, tlsAllowed)
			want, decided := classify(in[:min(len(in), 4)], tlsAllowed)
			if !decided {
				if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(prefix, in) {
					t.Fatalf("sniff(%q) = %v, %q, %v; want the whole input and ErrUnexpectedEOF", in, p, prefix, err)
				}
				continue
			}
			if err != nil || p != want {
				t.Fatalf("sniff(%q) = %v, %v; want %v", in, p, err, want)
			}
			rest, err := io.ReadAll(&replayConn{prefix: prefix, Conn: readerConn{r: r}})
			if err != nil || !bytes.Equal(rest, in) {
				t.Fatalf("replayed %q, %v; want %q", rest, err, in)
			}
		}
	})
}

// readerConn is a net.Conn that reads from r (and has nothing else).
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }
