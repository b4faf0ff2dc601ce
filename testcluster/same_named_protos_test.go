package testcluster_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// examples/counter and internal/testgrain each hold a counter.proto. This
// test binary links both packages, which panicked at init while granarygen
// registered every file under its bare name; each now registers under its
// path from the module's root, and a silo hosts and answers both.
func TestGrainPackagesWithSameNamedProtosLinkAndAnswer(t *testing.T) {
	for path, pkg := range map[string]string{
		"examples/counter/counter.proto":   "granary.examples.counter",
		"internal/testgrain/counter.proto": "granary.test",
	} {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		require.NoError(t, err, path)
		assert.Equal(t, pkg, string(fd.Package()), path)
	}

	c := testcluster.New(t, testcluster.Options{Silos: 1, Register: func(s *silo.Silo) error {
		if err := counter.RegisterCounterGrain(s, counter.New); err != nil {
			return err
		}
		return testgrain.RegisterCounterGrain(s, testgrain.New(nil))
	}})
	ctx := context.Background()

	example, err := counter.NewCounterRef(c.Client(), "k").Add(ctx, &counter.AddRequest{Delta: 2})
	require.NoError(t, err)
	assert.Equal(t, int64(2), example.GetValue())
	internal, err := testgrain.NewCounterRef(c.Client(), "k").Add(ctx, &testgrain.AddRequest{Delta: 5})
	require.NoError(t, err)
	assert.Equal(t, int64(5), internal.GetValue())
}
