package redistest_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServerAnswersAndStops(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	reply, err := s.Command("PING")
	require.NoError(t, err)
	assert.Equal(t, "PONG", reply)
	assert.Equal(t, "redis://"+s.Addr()+"/3", s.URL(3))

	s.Stop()
	_, err = s.Command("PING")
	assert.Error(t, err, "a stopped server does not answer")
	s.Stop() // safe twice
}

func TestRestartKeepsDataAndPort(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	addr := s.Addr()
	_, err := s.Command("SET", "k", "survives")
	require.NoError(t, err)

	s.Restart()
	assert.Equal(t, addr, s.Addr())
	got, err := s.Command("GET", "k")
	require.NoError(t, err)
	assert.Equal(t, "survives", got)
}

func TestPasswordIsRequired(t *testing.T) {
	s := redistest.Start(t, redistest.Options{Password: "s3cret"})
	reply, err := s.Command("PING")
	require.NoError(t, err, "Command authenticates")
	assert.Equal(t, "PONG", reply)
	assert.Equal(t, "redis://:s3cret@"+s.Addr()+"/0", s.URL(0))

	conn, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(line, "-NOAUTH"), "a client without the password is refused: %q", line)
}

func TestClusterServesEverySlot(t *testing.T) {
	s := redistest.Start(t, redistest.Options{Cluster: true})
	info, err := s.Command("CLUSTER", "INFO")
	require.NoError(t, err)
	assert.Contains(t, info, "cluster_slots_assigned:16384")
	_, err = s.Command("SET", "{any}key", "v")
	assert.NoError(t, err, "the one node owns the key's slot")
}

// childEnv marks the child process of TestMissingServer.
const childEnv = "GRANARY_REDISTEST_CHILD"

// TestStartWithoutServer runs Start with an empty PATH; it runs only as a
// child of TestMissingServer.
func TestStartWithoutServer(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs as a child of TestMissingServer")
	}
	t.Setenv("PATH", "")
	redistest.Start(t, redistest.Options{})
	t.Error("Start returned without a server")
}

func TestMissingServer(t *testing.T) {
	for _, tc := range []struct {
		ci   string
		want string
	}{
		{ci: "", want: "--- SKIP: TestStartWithoutServer"},
		{ci: "0", want: "--- SKIP: TestStartWithoutServer"},
		{ci: "1", want: "--- FAIL: TestStartWithoutServer"},
	} {
		t.Run("GRANARY_CI="+tc.ci, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestStartWithoutServer$", "-test.v", "-test.count=1", "-test.timeout=1m")
			// atexit_sleep_ms: a race-enabled child would idle a second at a
			// successful exit.
			cmd.Env = append(os.Environ(), childEnv+"=1", "GRANARY_CI="+tc.ci, "GORACE=atexit_sleep_ms=0")
			out, _ := cmd.CombinedOutput()
			assert.Contains(t, string(out), tc.want)
			assert.Contains(t, string(out), "install it (apt-get install redis-server)")
			lines := 0
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "redis-server") {
					lines++
				}
			}
			assert.Equal(t, 1, lines, "one line says what is missing:\n%s", out)
		})
	}
}
