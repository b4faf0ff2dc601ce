package cluster

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetaRoundTrips(t *testing.T) {
	for _, m := range []nodeMeta{
		{Generation: 1, Address: "127.0.0.1:1", Status: StatusJoining},
		{Generation: math.MaxInt64, Load: math.MaxInt64, Address: "[::1]:65535", Gateway: "10.0.0.7:30000", Status: StatusActive},
		{Generation: 1733050000000000000, Load: 12345, Address: "silo-a.internal:11111", Gateway: "gw.example:443", Status: StatusShuttingDown},
	} {
		got, err := decodeMeta(encodeMeta(m))
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
}

func TestMetaOfALaterLayoutKeepsItsKnownFields(t *testing.T) {
	m := nodeMeta{Generation: 9, Load: 3, Address: "127.0.0.1:5", Status: StatusActive}
	later := append(encodeMeta(m), 0x07, 'z', 'z') // a field a newer granary appended
	got, err := decodeMeta(later)
	require.NoError(t, err)
	assert.Equal(t, m, got)
}

// metaBytes builds metadata field by field, so that each case below breaks
// exactly one thing.
func metaBytes(version, status byte, gen, load uint64, addr, gateway string) []byte {
	b := []byte{version, status}
	b = binary.AppendUvarint(b, gen)
	b = binary.AppendUvarint(b, load)
	b = appendString(b, addr)
	return appendString(b, gateway)
}

func TestMetaDecoderRejectsWhatItCannotTrust(t *testing.T) {
	good := metaBytes(metaVersion, byte(StatusActive), 1, 1, "127.0.0.1:9", "")
	_, err := decodeMeta(good)
	require.NoError(t, err, "the base case must be valid")

	long := strings.Repeat("a", maxAddressLength) + ":1"
	cases := map[string][]byte{
		"empty":                 nil,
		"one byte":              {metaVersion},
		"unknown layout":        metaBytes(2, byte(StatusActive), 1, 1, "127.0.0.1:9", ""),
		"status zero":           metaBytes(metaVersion, 0, 1, 1, "127.0.0.1:9", ""),
		"status past the last":  metaBytes(metaVersion, byte(StatusShuttingDown)+1, 1, 1, "127.0.0.1:9", ""),
		"generation too large":  metaBytes(metaVersion, byte(StatusActive), math.MaxInt64+1, 1, "127.0.0.1:9", ""),
		"load too large":        metaBytes(metaVersion, byte(StatusActive), 1, math.MaxUint64, "127.0.0.1:9", ""),
		"truncated varint":      {metaVersion, byte(StatusActive), 0x80},
		"overlong varint":       append([]byte{metaVersion, byte(StatusActive)}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"no address":            metaBytes(metaVersion, byte(StatusActive), 1, 1, "", ""),
		"address without port":  metaBytes(metaVersion, byte(StatusActive), 1, 1, "127.0.0.1", ""),
		"address port zero":     metaBytes(metaVersion, byte(StatusActive), 1, 1, "127.0.0.1:0", ""),
		"address port too high": metaBytes(metaVersion, byte(StatusActive), 1, 1, "127.0.0.1:65536", ""),
		"address too long":      metaBytes(metaVersion, byte(StatusActive), 1, 1, long, ""),
		"address not UTF-8":     metaBytes(metaVersion, byte(StatusActive), 1, 1, "\xff\xfe:1", ""),
		"bad gateway":           metaBytes(metaVersion, byte(StatusActive), 1, 1, "127.0.0.1:9", "gateway"),
		"length past the end":   append([]byte{metaVersion, byte(StatusActive), 1, 1}, 0x40, 'a'),
		"huge length":           append([]byte{metaVersion, byte(StatusActive), 1, 1}, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"missing gateway field": good[:len(good)-1],
	}
	for name, b := range cases {
		_, err := decodeMeta(b)
		assert.ErrorIs(t, err, errBadMeta, name)
	}
}

func TestLeaveMessagesRoundTrip(t *testing.T) {
	for _, m := range []leaveMessage{
		{Kind: msgLeaving, ID: "silo-a", Generation: 42},
		{Kind: msgLeavingSeen, ID: "silo-a", Generation: math.MaxInt64, Acker: "silo-b"},
	} {
		got, err := decodeLeave(encodeLeave(m))
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
}

func TestLeaveMessageDecoderRejectsWhatItCannotTrust(t *testing.T) {
	notice := encodeLeave(leaveMessage{Kind: msgLeaving, ID: "silo-a", Generation: 1})
	cases := map[string][]byte{
		"empty":          nil,
		"unknown kind":   append([]byte{9}, notice[1:]...),
		"trailing bytes": append(notice, 0),
		"truncated":      notice[:len(notice)-1],
		"empty id":       encodeLeave(leaveMessage{Kind: msgLeaving, Generation: 1}),
		"id with space":  encodeLeave(leaveMessage{Kind: msgLeaving, ID: "silo a", Generation: 1}),
		"id too long":    encodeLeave(leaveMessage{Kind: msgLeaving, ID: strings.Repeat("x", MaxSiloIDLength+1), Generation: 1}),
		"bad acker":      encodeLeave(leaveMessage{Kind: msgLeavingSeen, ID: "silo-a", Generation: 1, Acker: "\n"}),
		"missing acker":  append([]byte{msgLeavingSeen}, notice[1:]...),
	}
	for name, b := range cases {
		_, err := decodeLeave(b)
		assert.ErrorIs(t, err, errBadMeta, name)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(nodeMeta{Generation: 1, Load: 2, Address: "127.0.0.1:1", Gateway: "127.0.0.1:2", Status: StatusActive}))
	f.Add(encodeMeta(nodeMeta{Generation: math.MaxInt64, Address: "[::1]:65535", Status: StatusJoining}))
	f.Add([]byte{metaVersion, byte(StatusActive), 0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		// What decodes is valid, and survives a round trip unchanged.
		again, err := decodeMeta(encodeMeta(m))
		if err != nil || again != m {
			t.Fatalf("round trip of %+v: %+v, %v", m, again, err)
		}
		if len(m.Address) > maxAddressLength || len(m.Gateway) > maxAddressLength || m.Generation < 0 || m.Load < 0 {
			t.Fatalf("accepted out-of-bounds metadata %+v", m)
		}
	})
}

func FuzzDecodeLeave(f *testing.F) {
	f.Add(encodeLeave(leaveMessage{Kind: msgLeaving, ID: "silo-a", Generation: 7}))
	f.Add(encodeLeave(leaveMessage{Kind: msgLeavingSeen, ID: "silo-a", Generation: 7, Acker: "silo-b"}))
	f.Add([]byte{msgLeaving})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeLeave(b)
		if err != nil {
			return
		}
		if checkSiloID(m.ID) != nil {
			t.Fatalf("accepted silo id %q", m.ID)
		}
		again, err := decodeLeave(encodeLeave(m))
		if err != nil || again != m {
			t.Fatalf("round trip of %+v: %+v, %v", m, again, err)
		}
	})
}
