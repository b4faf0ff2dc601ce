package transport

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"
)

// The handshake runs once per connection, after TLS (if any) and before any
// frame. Four messages, dialler first:
//
//	hello   dialler -> listener  version, role, flags, generation, nonce, cluster id, silo id
//	welcome listener -> dialler  the same fields for the listener, then its proof
//	proof   dialler -> listener  the dialler's proof
//	accept  listener -> dialler  empty: frames may follow
//
// Either end sends a refusal instead of its next message when it finds a
// mismatch, and closes. A proof is HMAC-SHA256, keyed by the cluster secret,
// over a label naming the end and the transcript (the whole hello message,
// then the welcome's body up to its proof); it is empty without a secret.
// A client may prove a token of its own instead (flagToken, the token's
// name after the silo id): the same proofs, keyed by the token's secret.
// Both nonces are in the transcript, so a proof is good for one connection
// only, and the labels keep one end's proof from passing for the other's.
//
// Every message is framed as: magic "GRNY", type (1 byte), body length (2
// bytes, big-endian, at most maxMessageBody), body. Strings are a 1-byte
// length then UTF-8 bytes. Each end reads a message into one fixed buffer,
// so the handshake allocates nothing for what a peer announces.
const (
	protocolVersion = 1

	msgHeaderSize  = 7
	maxMessageBody = 512
	maxMessageSize = msgHeaderSize + maxMessageBody

	msgHello   = 1
	msgWelcome = 2
	msgProof   = 3
	msgAccept  = 4
	msgReject  = 5

	nonceSize = 32
	proofSize = sha256.Size

	flagSecret = 1 << 0 // the sender has a cluster secret and proves it
	flagToken  = 1 << 1 // the dialler proves a client token, named after the silo id; the listener echoes it

	labelListener = "granary transport: listener proof"
	labelDialler  = "granary transport: dialler proof"
)

var magic = [4]byte{'G', 'R', 'N', 'Y'}

// hello is the body of a hello or welcome message.
type hello struct {
	version    uint16
	role       Role
	flags      uint8
	generation int64
	nonce      [nonceSize]byte
	clusterID  string
	siloID     string
	token      string // the client token's name, with flagToken
}

func (h *hello) identity() Identity {
	return Identity{Role: h.role, SiloID: h.siloID, Generation: h.generation, ClusterID: h.clusterID}
}

const credentialFlags = flagSecret | flagToken

func appendHello(b []byte, h *hello) []byte {
	b = binary.BigEndian.AppendUint16(b, h.version)
	b = append(b, byte(h.role), h.flags)
	b = binary.BigEndian.AppendUint64(b, uint64(h.generation))
	b = append(b, h.nonce[:]...)
	b = appendString(b, h.clusterID)
	b = appendString(b, h.siloID)
	if h.flags&flagToken != 0 {
		b = appendString(b, h.token)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

// errVersion is returned by decodeHello, with the version the body claims,
// when that is not protocolVersion: the rest of such a body is not ours to
// parse.
var errVersion = fmt.Errorf("%w: another protocol version", ErrVersionMismatch)

// decodeHello parses a hello body and returns what follows it.
func decodeHello(body []byte) (h hello, rest []byte, err error) {
	if len(body) < 2 {
		return h, nil, malformed("hello of %d bytes", len(body))
	}
	h.version = binary.BigEndian.Uint16(body)
	if h.version != protocolVersion {
		return h, nil, errVersion
	}
	const fixed = 2 + 1 + 1 + 8 + nonceSize
	if len(body) < fixed {
		return h, nil, malformed("hello of %d bytes", len(body))
	}
	h.role = Role(body[2])
	h.flags = body[3]
	h.generation = int64(binary.BigEndian.Uint64(body[4:]))
	copy(h.nonce[:], body[12:fixed])
	if !h.role.valid() {
		return h, nil, malformed("role %d", body[2])
	}
	if h.flags&^credentialFlags != 0 || h.flags&credentialFlags == credentialFlags {
		return h, nil, malformed("flags %#x", h.flags)
	}
	rest = body[fixed:]
	if h.clusterID, rest, err = decodeString(rest); err != nil {
		return h, nil, err
	}
	if h.siloID, rest, err = decodeString(rest); err != nil {
		return h, nil, err
	}
	if h.flags&flagToken != 0 {
		if h.token, rest, err = decodeString(rest); err != nil {
			return h, nil, err
		}
		if h.token == "" {
			return h, nil, malformed("empty token name")
		}
	}
	return h, rest, nil
}

func decodeString(b []byte) (string, []byte, error) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return "", nil, malformed("string runs past the message")
	}
	n := int(b[0])
	s := b[1 : 1+n]
	if n > MaxIDLength || !utf8.Valid(s) {
		return "", nil, malformed("string is not UTF-8 of at most %d bytes", MaxIDLength)
	}
	return string(s), b[1+n:], nil
}

// appendReject appends a refusal body: the reason's code and a detail,
// truncated to 255 bytes.
func appendReject(b []byte, reason error, detail string) []byte {
	if len(detail) > 255 {
		detail = detail[:255]
	}
	return appendString(append(b, reasonCode(reason)), detail)
}

// decodeReject parses a refusal body into the error it stands for, seen from
// the end that received it.
func decodeReject(body []byte) *HandshakeError {
	if len(body) < 2 || len(body) != 2+int(body[1]) {
		return &HandshakeError{Reason: ErrMalformedHandshake, Detail: "unreadable refusal from the peer"}
	}
	detail := body[2:]
	if !utf8.Valid(detail) {
		detail = nil
	}
	return &HandshakeError{Reason: reasonOf(body[0]), ByPeer: true, Detail: string(detail)}
}

func malformed(format string, args ...any) *HandshakeError {
	return &HandshakeError{Reason: ErrMalformedHandshake, Detail: fmt.Sprintf(format, args...)}
}

// parseHeader checks a message header and returns the type and body length.
func parseHeader(hdr []byte) (typ byte, n int, err error) {
	if [4]byte(hdr) != magic {
		return 0, 0, malformed("not a granary handshake")
	}
	n = int(binary.BigEndian.Uint16(hdr[5:]))
	if n > maxMessageBody {
		return 0, 0, malformed("message of %d bytes, limit is %d", n, maxMessageBody)
	}
	return hdr[4], n, nil
}

// readMessage reads one message into buf and returns its type and its body,
// which aliases buf.
func readMessage(r io.Reader, buf *[maxMessageSize]byte) (byte, []byte, error) {
	if _, err := io.ReadFull(r, buf[:msgHeaderSize]); err != nil {
		return 0, nil, err
	}
	return readBody(r, buf)
}

// readBody reads the body of the message whose header is in buf.
func readBody(r io.Reader, buf *[maxMessageSize]byte) (byte, []byte, error) {
	typ, n, err := parseHeader(buf[:msgHeaderSize])
	if err != nil {
		return 0, nil, err
	}
	body := buf[msgHeaderSize : msgHeaderSize+n]
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return typ, body, nil
}

// startMessage begins a message of type typ in buf; finishMessage sets its
// length once the body has been appended.
func startMessage(buf *[maxMessageSize]byte, typ byte) []byte {
	return append(append(buf[:0], magic[:]...), typ, 0, 0)
}

func finishMessage(msg []byte) []byte {
	binary.BigEndian.PutUint16(msg[5:], uint16(len(msg)-msgHeaderSize))
	return msg
}

// handshake runs one end of a handshake over rw.
type handshake struct {
	rw      io.ReadWriter
	local   Identity
	secret  []byte
	token   *Token // the dialler's client token, if any
	accept  []Role // roles a listener accepts; nil means all
	version uint16 // the version this end speaks; zero means protocolVersion (tests speak others)

	tokens      func(name string) ([]byte, bool) // a listener's client tokens; nil: none
	requireCred bool                             // a listener refuses clients without a credential
	certified   bool                             // the dialler showed a verified TLS certificate

	key []byte // what this connection's proofs are keyed by: the secret or the token's

	buf        [maxMessageSize]byte     // the message being read or written
	transcript [2 * maxMessageSize]byte // the hello message, then the welcome body up to its proof
	recorded   int
}

func (h *handshake) record(b []byte) { h.recorded += copy(h.transcript[h.recorded:], b) }

func (h *handshake) proof(label string) [proofSize]byte {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(label))
	m.Write(h.transcript[:h.recorded])
	var p [proofSize]byte
	m.Sum(p[:0])
	return p
}

func (h *handshake) myHello() hello {
	me := hello{
		version:    cmp.Or(h.version, protocolVersion),
		role:       h.local.Role,
		generation: h.local.Generation,
		clusterID:  h.local.ClusterID,
		siloID:     h.local.SiloID,
	}
	switch {
	case h.token != nil:
		me.flags, me.token = flagToken, h.token.Name
	case len(h.secret) > 0:
		me.flags |= flagSecret
	}
	_, _ = rand.Read(me.nonce[:]) // never fails, see crypto/rand
	return me
}

func (h *handshake) write(msg []byte) error {
	_, err := h.rw.Write(msg)
	return err
}

// refuse tells the peer why this end gives up, as far as the connection
// still lets it, and returns the error for this end.
func (h *handshake) refuse(reason error, format string, args ...any) *HandshakeError {
	e := &HandshakeError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
	_ = h.write(finishMessage(appendReject(startMessage(&h.buf, msgReject), reason, e.Detail)))
	return e
}

// refuseDecodeError refuses a peer whose hello did not decode.
func (h *handshake) refuseDecodeError(err error, peerVersion uint16) error {
	if err == errVersion {
		return h.refuse(ErrVersionMismatch, "peer speaks protocol version %d, this end %d", peerVersion, protocolVersion)
	}
	if e, ok := err.(*HandshakeError); ok {
		return h.refuse(e.Reason, "%s", e.Detail)
	}
	return err
}

// expect reads the next message, which must be of type typ or a refusal.
func (h *handshake) expect(typ byte) ([]byte, error) {
	got, body, err := readMessage(h.rw, &h.buf)
	if err != nil {
		return nil, err
	}
	switch got {
	case typ:
		return body, nil
	case msgReject:
		return nil, decodeReject(body)
	}
	return nil, h.refuse(ErrMalformedHandshake, "message of type %d where %d belongs", got, typ)
}

// checkSecretFlag refuses a peer whose hello disagrees with this end about
// having a cluster secret. The detail names the ends by their parts, since
// both ends read it.
func (h *handshake) checkSecretFlag(peer *hello, peerName, myName string) error {
	theirs, mine := peer.flags&flagSecret != 0, len(h.secret) > 0
	switch {
	case mine && !theirs:
		return h.refuse(ErrSecretMismatch, "the %s has no cluster secret and the %s requires one", peerName, myName)
	case theirs && !mine:
		return h.refuse(ErrSecretMismatch, "the %s has a cluster secret and the %s has none", peerName, myName)
	}
	return nil
}

// dial runs the dialler's end and returns the listener's identity.
func (h *handshake) dial() (Identity, error) {
	me := h.myHello()
	msg := finishMessage(appendHello(startMessage(&h.buf, msgHello), &me))
	h.record(msg)
	if err := h.write(msg); err != nil {
		return Identity{}, err
	}
	body, err := h.expect(msgWelcome)
	if err != nil {
		return Identity{}, err
	}
	peer, rest, err := decodeHello(body)
	if err != nil {
		return Identity{}, h.refuseDecodeError(err, peer.version)
	}
	if h.token != nil {
		if peer.flags&flagToken == 0 || peer.token != h.token.Name {
			return Identity{}, h.refuse(ErrCredentialRefused, "the listener did not take the client token %q", h.token.Name)
		}
		h.key = h.token.Secret
	} else {
		if peer.flags&flagToken != 0 {
			return Identity{}, h.refuse(ErrMalformedHandshake, "the listener answers a client token the dialler did not present")
		}
		if err := h.checkSecretFlag(&peer, "listener", "dialler"); err != nil {
			return Identity{}, err
		}
		h.key = h.secret
	}
	proofLen := 0
	if len(h.key) > 0 {
		proofLen = proofSize
	}
	if len(rest) != proofLen {
		return Identity{}, h.refuse(ErrMalformedHandshake, "welcome has %d bytes after its fields, not %d", len(rest), proofLen)
	}
	switch {
	case peer.role != RoleSilo:
		return Identity{}, h.refuse(ErrRoleRefused, "the listener says it is a %v, not a silo", peer.role)
	case peer.clusterID != me.clusterID:
		return Identity{}, h.refuse(ErrClusterMismatch, "the listener is in cluster %q, this end in %q", peer.clusterID, me.clusterID)
	}
	h.record(body[:len(body)-proofLen])
	reply := startMessage(&h.buf, msgProof)
	if proofLen > 0 {
		want := h.proof(labelListener)
		if !hmac.Equal(rest, want[:]) {
			if h.token != nil {
				return Identity{}, h.refuse(ErrCredentialRefused, "the listener's proof of the client token %q is wrong", h.token.Name)
			}
			return Identity{}, h.refuse(ErrSecretMismatch, "the listener's proof of the cluster secret is wrong")
		}
		mine := h.proof(labelDialler)
		reply = append(reply, mine[:]...)
	}
	if err := h.write(finishMessage(reply)); err != nil {
		return Identity{}, err
	}
	if body, err = h.expect(msgAccept); err != nil {
		return Identity{}, err
	}
	if len(body) != 0 {
		return Identity{}, malformed("accept with a body of %d bytes", len(body))
	}
	return peer.identity(), nil
}

// listen runs the listener's end, whose first message header is already in
// h.buf, and returns the dialler's identity.
func (h *handshake) listen() (Identity, error) {
	typ, body, err := readBody(h.rw, &h.buf)
	if err != nil {
		return Identity{}, err
	}
	if typ != msgHello {
		return Identity{}, h.refuse(ErrMalformedHandshake, "message of type %d where a hello belongs", typ)
	}
	h.record(h.buf[:msgHeaderSize+len(body)])
	peer, rest, err := decodeHello(body)
	if err != nil {
		return Identity{}, h.refuseDecodeError(err, peer.version)
	}
	if len(rest) != 0 {
		return Identity{}, h.refuse(ErrMalformedHandshake, "hello has %d bytes after its fields", len(rest))
	}
	switch {
	case h.accept != nil && !slices.Contains(h.accept, peer.role):
		return Identity{}, h.refuse(ErrRoleRefused, "this listener does not accept %v connections", peer.role)
	case peer.clusterID != h.local.ClusterID:
		return Identity{}, h.refuse(ErrClusterMismatch, "the listener is not in cluster %q", peer.clusterID)
	}
	if err := h.admitCredential(&peer); err != nil {
		return Identity{}, err
	}

	me := h.myHello()
	if peer.flags&flagToken != 0 {
		me.flags, me.token = flagToken, peer.token // a welcome echoes the token it takes
	} else {
		me.flags &^= flagToken
	}
	msg := appendHello(startMessage(&h.buf, msgWelcome), &me)
	h.record(msg[msgHeaderSize:])
	var want [proofSize]byte
	if len(h.key) > 0 {
		mine := h.proof(labelListener)
		want = h.proof(labelDialler)
		msg = append(msg, mine[:]...)
	}
	if err := h.write(finishMessage(msg)); err != nil {
		return Identity{}, err
	}
	body, err = h.expect(msgProof)
	if err != nil {
		return Identity{}, err
	}
	switch {
	case len(h.key) == 0:
		if len(body) != 0 {
			return Identity{}, h.refuse(ErrMalformedHandshake, "proof of %d bytes without a secret", len(body))
		}
	case !hmac.Equal(body, want[:]) && peer.flags&flagToken != 0:
		return Identity{}, h.refuse(ErrCredentialRefused, "the dialler's proof of the client token %q is wrong", peer.token)
	case !hmac.Equal(body, want[:]):
		return Identity{}, h.refuse(ErrSecretMismatch, "the dialler's proof of the cluster secret is wrong")
	}
	if err := h.write(finishMessage(startMessage(&h.buf, msgAccept))); err != nil {
		return Identity{}, err
	}
	id := peer.identity()
	id.Token = peer.token
	return id, nil
}

// admitCredential checks the credential a dialler's hello announces and
// sets the key of the connection's proofs. A client token never opens a
// silo's connection, whatever the listener accepts otherwise.
func (h *handshake) admitCredential(peer *hello) error {
	if peer.flags&flagToken == 0 {
		if err := h.checkSecretFlag(peer, "dialler", "listener"); err != nil {
			return err
		}
		if peer.role == RoleClient && h.requireCred && !h.certified {
			return h.refuse(ErrCredentialRefused, "this listener requires a client credential: a client token or a TLS client certificate")
		}
		h.key = h.secret
		return nil
	}
	if peer.role != RoleClient {
		return h.refuse(ErrRoleRefused, "a client token cannot open a %v connection", peer.role)
	}
	if h.tokens == nil {
		return h.refuse(ErrCredentialRefused, "this listener takes no client tokens")
	}
	secret, ok := h.tokens(peer.token)
	if !ok || len(secret) == 0 {
		return h.refuse(ErrCredentialRefused, "unknown client token %q", peer.token)
	}
	h.key = secret
	return nil
}
