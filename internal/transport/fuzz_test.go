package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"unicode/utf8"
)

// chunkedReader returns at most size bytes per Read, so the fuzzer explores
// frames split at every possible point.
type chunkedReader struct {
	r    io.Reader
	size int
}

func (c chunkedReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), c.size)])
}

func frameStream(bodies ...string) []byte {
	var b []byte
	for _, s := range bodies {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

// FuzzFrameReader feeds arbitrary streams, in arbitrary read sizes, to the frame
// decoder: it must never panic, never return a body above the limit, return
// exactly the frames in the stream, and end with the right error.
func FuzzFrameReader(f *testing.F) {
	f.Add(uint8(1), frameStream("a", "", "hello"))
	f.Add(uint8(3), frameStream(string(bytes.Repeat([]byte("x"), 100)), "tail"))
	f.Add(uint8(200), []byte{0, 0, 0, 65, 'x'})
	f.Add(uint8(7), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(2), []byte{0, 0})
	const limit, slab = 64, 16
	f.Fuzz(func(t *testing.T, chunk uint8, stream []byte) {
		fr := frameReader{
			r:        chunkedReader{r: bytes.NewReader(stream), size: int(chunk)%32 + 1},
			max:      limit,
			slabSize: slab,
		}
		var frames [][]byte
		var err error
		for {
			var b []byte
			if b, err = fr.next(); err != nil {
				break
			}
			if len(b) > limit || cap(b) != len(b) {
				t.Fatalf("body of len %d cap %d, limit %d", len(b), cap(b), limit)
			}
			frames = append(frames, b)
		}
		// The frames must re-encode to a prefix of the stream, and the error must
		// say what stopped the reader at the end of that prefix.
		consumed := 0
		for _, b := range frames {
			consumed += headerSize + len(b)
		}
		re := frameStream()
		for _, b := range frames {
			re = append(binary.BigEndian.AppendUint32(re, uint32(len(b))), b...)
		}
		if !bytes.Equal(re, stream[:consumed]) {
			t.Fatalf("frames do not re-encode to the stream")
		}
		rest := stream[consumed:]
		switch {
		case len(rest) == 0:
			if err != io.EOF {
				t.Fatalf("clean end: got %v", err)
			}
		case len(rest) >= headerSize && binary.BigEndian.Uint32(rest) > limit:
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("oversize frame: got %v", err)
			}
		default:
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("truncated frame: got %v", err)
			}
		}
	})
}

// seedHello is a dialler's hello message, for seeds.
func seedHello(version uint16, role Role, flags uint8, cluster, silo string) []byte {
	var buf [maxMessageSize]byte
	h := hello{version: version, role: role, flags: flags, generation: 99, clusterID: cluster, siloID: silo}
	return bytes.Clone(finishMessage(appendHello(startMessage(&buf, msgHello), &h)))
}

// seedTokenHello is a hello that presents the client token named name.
func seedTokenHello(role Role, name string) []byte {
	var buf [maxMessageSize]byte
	h := hello{version: protocolVersion, role: role, flags: flagToken, clusterID: "", token: name}
	return bytes.Clone(finishMessage(appendHello(startMessage(&buf, msgHello), &h)))
}

func seedMessage(typ byte, body []byte) []byte {
	var buf [maxMessageSize]byte
	return bytes.Clone(finishMessage(append(startMessage(&buf, typ), body...)))
}

// FuzzHandshakeDecoder feeds arbitrary bytes to the handshake's message
// reader and body decoders: they must never panic, never return a body above
// the limit, and what decodes must encode back to the same bytes.
func FuzzHandshakeDecoder(f *testing.F) {
	f.Add(seedHello(protocolVersion, RoleSilo, flagSecret, "prod", "silo-1"))
	f.Add(seedHello(protocolVersion, RoleClient, 0, "", ""))
	f.Add(seedHello(protocolVersion+1, RoleClient, 0, "", ""))
	f.Add(seedTokenHello(RoleClient, "reporting"))
	f.Add(seedTokenHello(RoleSilo, "reporting"))
	f.Add(seedHello(protocolVersion, RoleClient, flagToken, "", "")) // the flag without a name
	f.Add(seedHello(protocolVersion, RoleClient, flagToken|flagSecret, "", ""))
	f.Add(append(seedHello(protocolVersion, RoleSilo, 0, "c", "s"), seedMessage(msgProof, nil)...))
	f.Add(seedMessage(msgReject, appendReject(nil, ErrClusterMismatch, "not in cluster")))
	f.Add(seedMessage(msgReject, []byte{200, 3, 0xff, 0xfe, 0xfd}))
	f.Add([]byte("GRNY\x01\xff\xff"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		var buf [maxMessageSize]byte
		for {
			typ, body, err := readMessage(r, &buf)
			if err != nil {
				var he *HandshakeError
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &he) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(body) > maxMessageBody {
				t.Fatalf("body of %d bytes", len(body))
			}
			switch typ {
			case msgHello, msgWelcome:
				h, rest, err := decodeHello(body)
				if err != nil {
					continue
				}
				if h.version != protocolVersion || !h.role.valid() || len(h.clusterID) > MaxIDLength || len(h.siloID) > MaxIDLength ||
					len(h.token) > MaxIDLength || (h.flags&flagToken != 0) == (h.token == "") || h.flags&credentialFlags == credentialFlags {
					t.Fatalf("decoded an invalid hello %+v", h)
				}
				if re := appendHello(nil, &h); !bytes.Equal(re, body[:len(body)-len(rest)]) {
					t.Fatalf("hello does not re-encode: %x vs %x", re, body)
				}
			case msgReject:
				// A readable refusal keeps its detail when that is UTF-8 and
				// drops it otherwise; an unreadable one is malformed.
				e := decodeReject(body)
				switch {
				case e.Reason == nil || !utf8.ValidString(e.Detail) || len(e.Detail) > 255:
					t.Fatalf("refusal %x decoded to %+v", body, e)
				case e.ByPeer && utf8.Valid(body[2:]) && e.Detail != string(body[2:]):
					t.Fatalf("refusal %x lost its detail: %+v", body, e)
				case !e.ByPeer && e.Reason != ErrMalformedHandshake:
					t.Fatalf("unreadable refusal %x decoded to %+v", body, e)
				}
			}
		}
	})
}

// scripted is a peer's side of a handshake: it reads from a script and
// collects what this end writes.
type scripted struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (s *scripted) Read(p []byte) (int, error)  { return s.in.Read(p) }
func (s *scripted) Write(p []byte) (int, error) { return s.out.Write(p) }

// FuzzHandshake runs either end of the handshake against arbitrary bytes
// from the peer: it must never panic, fail with anything but a handshake or
// stream error, or succeed without a valid proof when it has a secret; and
// every message it writes must be well formed and bounded.
func FuzzHandshake(f *testing.F) {
	client := seedHello(protocolVersion, RoleClient, 0, "", "")
	f.Add(false, false, append(client, seedMessage(msgProof, nil)...))
	f.Add(false, true, append(seedHello(protocolVersion, RoleClient, flagSecret, "", ""), seedMessage(msgProof, make([]byte, proofSize))...))
	f.Add(false, false, seedHello(protocolVersion, RoleSilo, 0, "other", "x"))
	f.Add(false, false, append(client, seedMessage(msgReject, appendReject(nil, ErrSecretMismatch, "no"))...))
	welcome := seedMessage(msgWelcome, appendHello(nil, &hello{version: protocolVersion, role: RoleSilo}))
	f.Add(true, false, append(welcome, seedMessage(msgAccept, nil)...))
	f.Add(true, true, welcome)
	f.Add(true, false, seedMessage(msgReject, appendReject(nil, ErrRoleRefused, "no clients")))
	f.Add(false, false, append(seedTokenHello(RoleClient, "tok"), seedMessage(msgProof, make([]byte, proofSize))...))
	f.Add(false, true, append(seedTokenHello(RoleSilo, "tok"), seedMessage(msgProof, make([]byte, proofSize))...))
	f.Add(false, false, append(seedTokenHello(RoleClient, "unknown"), seedMessage(msgProof, nil)...))
	f.Fuzz(func(t *testing.T, asDialler, withSecret bool, input []byte) {
		peer := &scripted{in: bytes.NewReader(input)}
		h := &handshake{rw: peer, local: Identity{Role: RoleSilo}}
		if withSecret {
			h.secret = secretA
		}
		// A listener knows one client token; one that passes must have
		// been proved.
		h.tokens = func(name string) ([]byte, bool) { return secretB, name == "tok" }
		var err error
		var got Identity
		if asDialler {
			_, err = h.dial()
		} else if _, err = io.ReadFull(peer, h.buf[:msgHeaderSize]); err == nil {
			got, err = h.listen()
		}
		var he *HandshakeError
		switch {
		case err == nil && withSecret && got.Token == "":
			t.Fatalf("a handshake with a secret passed on forged bytes %x", input)
		case err == nil && got.Token != "":
			t.Fatalf("a client token passed on forged bytes %x", input)
		case err == nil && got.Role == RoleSilo && got.Token != "":
			t.Fatalf("a token opened a silo connection: %x", input)
		case err != nil && !errors.As(err, &he) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
			t.Fatalf("unexpected error %v", err)
		}
		written := bytes.NewReader(peer.out.Bytes())
		var buf [maxMessageSize]byte
		for n := 0; written.Len() > 0; n++ {
			if n == 3 {
				t.Fatalf("more than 3 messages written")
			}
			if _, _, err := readMessage(written, &buf); err != nil {
				t.Fatalf("wrote a malformed message: %v", err)
			}
		}
	})
}
