package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Everything in this file is read from the network, from any peer that holds
// the cluster's key, so the decoders trust no length and no value: every
// length is checked against what arrived and against a small bound before
// anything is sliced, and the result is validated as a whole.

// errBadMeta is wrapped by every decoding failure of node metadata and of
// membership messages.
var errBadMeta = errors.New("cluster: bad node metadata")

// metaVersion is the layout version of node metadata. Later versions may
// append fields, which this version ignores; a change of the existing
// fields needs a new version.
const metaVersion = 1

// Bounds on what a peer may announce.
const (
	// MaxSiloIDLength bounds a silo id in bytes.
	MaxSiloIDLength = 128
	// maxAddressLength bounds a host:port in node metadata.
	maxAddressLength = 255
)

// nodeMeta is what a silo publishes about itself in memberlist's node
// metadata; its id is memberlist's node name.
type nodeMeta struct {
	Generation int64
	Address    string
	Gateway    string
	Status     Status
	Load       int64
}

// encodeMeta lays out node metadata as:
//
//	version  byte (1)
//	status   byte
//	generation, load  uvarint each
//	address, gateway  uvarint length + bytes each (gateway may be empty)
func encodeMeta(m nodeMeta) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+2+len(m.Address)+len(m.Gateway)+4)
	b = append(b, metaVersion, byte(m.Status))
	b = binary.AppendUvarint(b, uint64(m.Generation))
	b = binary.AppendUvarint(b, uint64(m.Load))
	b = appendString(b, m.Address)
	return appendString(b, m.Gateway)
}

func decodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(b) < 2 {
		return m, fmt.Errorf("%w: %d bytes", errBadMeta, len(b))
	}
	if b[0] != metaVersion {
		return m, fmt.Errorf("%w: layout version %d, want %d", errBadMeta, b[0], metaVersion)
	}
	m.Status = Status(b[1])
	if !m.Status.valid() {
		return m, fmt.Errorf("%w: status %d", errBadMeta, b[1])
	}
	r := reader{b: b[2:]}
	m.Generation = r.int64("generation")
	m.Load = r.int64("load")
	m.Address = r.string("address", maxAddressLength)
	m.Gateway = r.string("gateway", maxAddressLength)
	if r.err != nil {
		return nodeMeta{}, r.err
	}
	// Any bytes left are fields of a later layout version.
	if err := checkAddress(m.Address, 1); err != nil {
		return nodeMeta{}, fmt.Errorf("%w: address: %w", errBadMeta, err)
	}
	if m.Gateway != "" {
		if err := checkAddress(m.Gateway, 1); err != nil {
			return nodeMeta{}, fmt.Errorf("%w: gateway: %w", errBadMeta, err)
		}
	}
	return m, nil
}

// Membership messages travel as memberlist user messages; the first byte
// says which.
const (
	// msgLeaving: "silo <id> of <generation> is about to leave", sent by a
	// silo that stops gracefully to every member it sees.
	msgLeaving = 1
	// msgLeavingSeen: "<acker> recorded that <id> of <generation> is
	// leaving", the answer the leaving silo waits for.
	msgLeavingSeen = 2
)

// leaveMessage is both a msgLeaving and its answer (Acker set).
type leaveMessage struct {
	Kind       byte
	ID         string
	Generation int64
	Acker      string // msgLeavingSeen only
}

func encodeLeave(m leaveMessage) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+2+len(m.ID)+len(m.Acker))
	b = append(b, m.Kind)
	b = binary.AppendUvarint(b, uint64(m.Generation))
	b = appendString(b, m.ID)
	if m.Kind == msgLeavingSeen {
		b = appendString(b, m.Acker)
	}
	return b
}

func decodeLeave(b []byte) (leaveMessage, error) {
	var m leaveMessage
	if len(b) < 1 || b[0] != msgLeaving && b[0] != msgLeavingSeen {
		return m, fmt.Errorf("%w: unknown message", errBadMeta)
	}
	m.Kind = b[0]
	r := reader{b: b[1:]}
	m.Generation = r.int64("generation")
	m.ID = r.string("silo id", MaxSiloIDLength)
	if m.Kind == msgLeavingSeen {
		m.Acker = r.string("acker", MaxSiloIDLength)
	}
	if r.err != nil {
		return leaveMessage{}, r.err
	}
	if len(r.b) != 0 {
		return leaveMessage{}, fmt.Errorf("%w: %d trailing bytes", errBadMeta, len(r.b))
	}
	if err := checkSiloID(m.ID); err != nil {
		return leaveMessage{}, fmt.Errorf("%w: %w", errBadMeta, err)
	}
	if m.Kind == msgLeavingSeen {
		if err := checkSiloID(m.Acker); err != nil {
			return leaveMessage{}, fmt.Errorf("%w: acker: %w", errBadMeta, err)
		}
	}
	return m, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes uvarints and length-prefixed strings, keeping the first
// error; after one, every read returns a zero value.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: %s: bad varint", errBadMeta, field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int64(field string) int64 {
	v := r.uvarint(field)
	if v > math.MaxInt64 && r.err == nil {
		r.err = fmt.Errorf("%w: %s %d out of range", errBadMeta, field, v)
	}
	return int64(v)
}

func (r *reader) string(field string, maxLen int) string {
	n := r.uvarint(field)
	if r.err != nil {
		return ""
	}
	if n > uint64(maxLen) || n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: %s: length %d (at most %d, %d bytes left)", errBadMeta, field, n, maxLen, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	if !utf8.ValidString(s) {
		r.err = fmt.Errorf("%w: %s is not UTF-8", errBadMeta, field)
		return ""
	}
	return s
}

// checkSiloID accepts a silo id: 1 to MaxSiloIDLength bytes of printable
// UTF-8 without spaces, so that ids are safe in logs, seeds and file names.
func checkSiloID(id string) error {
	if id == "" || len(id) > MaxSiloIDLength {
		return fmt.Errorf("silo id must be 1 to %d bytes, got %d", MaxSiloIDLength, len(id))
	}
	if !utf8.ValidString(id) {
		return errors.New("silo id is not UTF-8")
	}
	for _, c := range id {
		if !unicode.IsPrint(c) || unicode.IsSpace(c) {
			return fmt.Errorf("silo id %q contains %q", id, c)
		}
	}
	return nil
}

// checkAddress accepts host:port with a numeric port no lower than minPort.
func checkAddress(addr string, minPort int) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from %d to 65535", addr, minPort)
	}
	return nil
}
