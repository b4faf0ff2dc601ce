package proxy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// wireInt64 is an Int64Value with a hand-written codec that records its use.
type wireInt64 struct {
	*wrapperspb.Int64Value
	appended, merged *int
	mergeErr         error
}

func (w wireInt64) AppendGranaryWire(b []byte) ([]byte, error) {
	*w.appended++
	return proto.MarshalOptions{}.MarshalAppend(b, w.Int64Value)
}

func (w wireInt64) MergeGranaryWire(b []byte) error {
	*w.merged++
	if w.mergeErr != nil {
		return w.mergeErr
	}
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(b, w.Int64Value)
}

func TestCodecUsesGeneratedMethodsWhenPresent(t *testing.T) {
	var appended, merged int
	in := wireInt64{Int64Value: wrapperspb.Int64(42), appended: &appended, merged: &merged}
	b, err := AppendMessage([]byte{0xff}, in)
	require.NoError(t, err)
	assert.Equal(t, 1, appended)
	assert.Equal(t, byte(0xff), b[0], "appends after what b holds")

	out := wireInt64{Int64Value: &wrapperspb.Int64Value{}, appended: &appended, merged: &merged}
	require.NoError(t, UnmarshalFresh(b[1:], out))
	assert.Equal(t, 1, merged)
	assert.EqualValues(t, 42, out.Value)

	boom := errors.New("boom")
	out.mergeErr = boom
	require.ErrorIs(t, UnmarshalFresh(b[1:], out), boom)
}

func TestCodecFallsBackToProto(t *testing.T) {
	b, err := AppendMessage(nil, wrapperspb.String("hi"))
	require.NoError(t, err)
	want, err := proto.Marshal(wrapperspb.String("hi"))
	require.NoError(t, err)
	assert.Equal(t, want, b)

	out := &wrapperspb.StringValue{}
	require.NoError(t, UnmarshalFresh(b, out))
	assert.Equal(t, "hi", out.Value)

	_, err = AppendMessage(nil, wrapperspb.String("\xff"))
	require.Error(t, err, "proto3 strings must be UTF-8")
	require.Error(t, UnmarshalFresh([]byte{0x0a, 0x05, 'a'}, &wrapperspb.StringValue{}), "truncated input")
}
