package amqp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	goamqp "github.com/Azure/go-amqp"
)

// The fuzz targets decode arbitrary input and require that the decoders never panic, fail
// only with their documented errors, and that whatever decodes re-encodes to a canonical
// form that is stable (encode(decode(encode(decode(x)))) == encode(decode(x))). Their seed
// corpora live in testdata/fuzz; AMQP_WRITE_CORPUS=1 go test -run TestWriteFuzzCorpus
// rewrites them from the values the table tests use.

func FuzzDecodeValue(f *testing.F) {
	for _, s := range valueSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n, err := DecodeValue(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeValue error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("DecodeValue took %d of %d bytes", n, len(b))
		}
		enc, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("AppendValue(decoded %#v): %v", v, err)
		}
		v2, n2, err := DecodeValue(enc)
		if err != nil || n2 != len(enc) {
			t.Fatalf("DecodeValue(re-encoded % x) = %d bytes, %v", enc, n2, err)
		}
		enc2, err := AppendValue(nil, v2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("unstable encoding:\n% x\n% x (%v)", enc, enc2, err)
		}
	})
}

func FuzzParseFrame(f *testing.F) {
	for _, s := range frameSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := ParseFrame(b, 0)
		if err != nil {
			var e *Error
			if !errors.Is(err, ErrMalformed) && !IsNotImplemented(err) && !errors.As(err, &e) {
				t.Fatalf("ParseFrame error %v of an unexpected kind", err)
			}
			return
		}
		if n < frameHeaderSize || n > len(b) {
			t.Fatalf("ParseFrame took %d of %d bytes", n, len(b))
		}
		enc, err := AppendFrame(nil, fr.Type, fr.Channel, fr.Body)
		if err != nil {
			t.Fatalf("AppendFrame(decoded %#v): %v", fr.Body, err)
		}
		fr2, _, err := ParseFrame(enc, 0)
		if err != nil {
			t.Fatalf("ParseFrame(re-encoded % x): %v", enc, err)
		}
		enc2, err := AppendFrame(nil, fr2.Type, fr2.Channel, fr2.Body)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("unstable encoding:\n% x\n% x (%v)", enc, enc2, err)
		}
	})
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range messageSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		checkKeepingBody(t, b, m, err)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Unmarshal error %v does not wrap ErrMalformed", err)
			}
			return
		}
		enc, err := Marshal(m)
		if err != nil {
			t.Fatalf("Marshal(decoded %#v): %v", m, err)
		}
		m2, err := Unmarshal(enc)
		if err != nil {
			t.Fatalf("Unmarshal(re-encoded % x): %v", enc, err)
		}
		enc2, err := Marshal(m2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("unstable encoding:\n% x\n% x (%v)", enc, enc2, err)
		}
	})
}

// checkKeepingBody checks UnmarshalKeepingBody against Unmarshal's result m, err for b: it
// accepts what Unmarshal accepts, with the same sections and raw body and no body values, and
// refuses only what Unmarshal refuses too (Unmarshal may also refuse a body its decoding budget
// cannot build).
func checkKeepingBody(t *testing.T, b []byte, m *Message, err error) {
	t.Helper()
	k, kerr := UnmarshalKeepingBody(b)
	switch {
	case kerr != nil && err == nil:
		t.Fatalf("UnmarshalKeepingBody refuses what Unmarshal decodes: %v", kerr)
	case kerr != nil && !errors.Is(kerr, ErrMalformed):
		t.Fatalf("UnmarshalKeepingBody error %v does not wrap ErrMalformed", kerr)
	case kerr == nil && err != nil && !strings.Contains(err.Error(), "would take more memory"):
		t.Fatalf("UnmarshalKeepingBody accepts what Unmarshal refuses: %v", err)
	case kerr == nil && (k.Value != nil || k.Sequence != nil):
		t.Fatalf("UnmarshalKeepingBody built the body: %#v %#v", k.Value, k.Sequence)
	case kerr == nil && err == nil:
		built := *m // all but the body's values (a NaN is not DeepEqual to itself)
		built.Value, built.Sequence = nil, nil
		if !reflect.DeepEqual(k, &built) {
			t.Fatalf("UnmarshalKeepingBody gave\n%#v\nUnmarshal\n%#v", k, &built)
		}
	}
}

func valueSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, v := range []any{
		nil, true, uint32(300), int64(-5), 1.5, Char('x'), uuid1, []byte("b"), "s", Symbol("y"),
		List{uint64(1), List{}}, Map{{Key: Symbol("k"), Value: Map{}}},
		Array{Type: TypeLong, Elems: []any{int64(1), int64(1 << 40)}},
		Array{Descriptor: Symbol("d"), Type: TypeList, Elems: []any{List{"a"}}},
		Described{Descriptor: uint64(0x137000000c), Value: "session"},
	} {
		b, err := AppendValue(nil, v)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return append(seeds, hx("e0 02 03 43"), hx("f0 00000005 ffffffff 43"), nestedLists(70), hx("d0 00000005 ffffffff 40"))
}

func frameSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, p := range samplePerformatives() {
		typ := FrameTypeAMQP
		if p.descriptor() >= descSASLMechs {
			typ = FrameTypeSASL
		}
		b, err := AppendFrame(nil, typ, 1, p)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return append(seeds, emptyFrame, hx("00000010 03 00 0001 deadbeef 00531745"), hx("0000000a 02 00 0000 ffff"))
}

func messageSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	batch := &Message{}
	for _, m := range []*Message{
		sampleMessage(), {HasValue: true}, {Value: Map{{Key: "operation", Value: "put-token"}}},
		{Sequence: []List{{int64(1)}, {"x"}}}, {Header: &Header{Priority: 4}},
	} {
		b, err := Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
		batch.Data = append(batch.Data, b)
	}
	b, err := Marshal(batch)
	if err != nil {
		tb.Fatal(err)
	}
	seeds = append(seeds, b)
	to := "q"
	gb, err := (&goamqp.Message{Properties: &goamqp.MessageProperties{To: &to}, Value: "v"}).MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return append(seeds, gb)
}

// TestWriteFuzzCorpus writes the seed corpora under testdata/fuzz when AMQP_WRITE_CORPUS
// is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("AMQP_WRITE_CORPUS") == "" {
		t.Skip("set AMQP_WRITE_CORPUS=1 to rewrite testdata/fuzz")
	}
	for name, seeds := range map[string][][]byte{
		"FuzzDecodeValue": valueSeeds(t),
		"FuzzParseFrame":  frameSeeds(t),
		"FuzzUnmarshal":   messageSeeds(t),
		"FuzzConnection":  connectionSeeds(t),
	} {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
