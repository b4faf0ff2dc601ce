package main

import (
	"bytes"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pageTables is what the dashboard shows, read from the page's DOM: each
// table's rows as the texts of their cells.
type pageTables struct {
	Snapshot    string     `json:"snapshot"`
	Draws       int        `json:"draws"`
	Self        string     `json:"self"`
	Members     [][]string `json:"members"`
	Activations [][]string `json:"activations"`
	Keys        [][]string `json:"keys"`
	KeysHidden  bool       `json:"keysHidden"`
	KeysNote    string     `json:"keysNote"`
	Calls       [][]string `json:"calls"`
	Text        string     `json:"text"`
}

const readTables = `(() => {
  const rows = id => [...document.querySelectorAll('#' + id + ' tbody tr')].map(tr => [...tr.children].map(td => td.textContent));
  return {
    snapshot: document.body.dataset.snapshot || '', draws: Number(document.body.dataset.draws || 0), self: document.getElementById('self').textContent,
    members: rows('members'), activations: rows('activations'), keys: rows('keys'), calls: rows('calls'),
    keysHidden: document.getElementById('keys').hidden, keysNote: document.getElementById('keys-note').textContent,
    text: document.body.innerText,
  };
})()`

// screenshotsDir is where GRANARY_SCREENSHOTS=1 writes the screenshots
// the docs show; without it they go to the test's temporary directory.
func screenshotsDir(t *testing.T) string {
	if os.Getenv("GRANARY_SCREENSHOTS") == "1" {
		return filepath.Join("..", "..", "docs", "images")
	}
	return t.TempDir()
}

// Three silo processes; limiters used through the rate-limit API; then
// headless Chromium opens each silo's dashboard, public and admin, and
// what each page shows is checked against the cluster's own answers:
// /cluster, the API's Statistics, /metrics.
func TestTheDashboardShowsTheClusterInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs three processes and a browser")
	}
	b := startBrowser(t)
	bin := buildBinary(t)
	config := writeFile(t, "granary.yaml", `
ratelimit:
  configurations:
    login:
      fixed-window: {permit-limit: 5, window: 1h}
    api:
      token-bucket: {token-limit: 20, tokens-per-period: 1, replenishment-period: 1h, queue-limit: 4}
`)
	type siloPorts struct{ name, http, admin string }
	var silos []siloPorts
	seed := ""
	for _, name := range []string{"a", "b", "c"} {
		ports := siloPorts{name: name, http: freeAddr(t), admin: freeAddr(t)}
		_, gossip := startProcess(t, bin, name, seed, "-config", config, "-http", ports.http, "-admin", ports.admin, "-gateway", "none")
		if seed == "" {
			seed = gossip
		}
		silos = append(silos, ports)
	}
	for _, s := range silos {
		require.Eventually(t, func() bool {
			var c clusterAnswer
			return getJSON("http://"+s.http+"/cluster", &c) == nil && len(c.Members) == 3 &&
				strings.Count(fmt.Sprint(c.Members), " active active ") == 3
		}, 60*time.Second, 50*time.Millisecond, "silo %s sees the three active", s.name)
	}

	// Load through a's public API: alice past her limit, bob within his,
	// and a token bucket.
	acquire := func(algorithm, key, config string) {
		body := fmt.Sprintf(`{"algorithm":%q,"key":%q,"config":%q}`, algorithm, key, config)
		resp, err := http.Post("http://"+silos[0].http+"/granary.ratelimit.v1.RateLimitService/Acquire", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	for range 7 {
		acquire("ALGORITHM_FIXED_WINDOW", "alice", "login")
	}
	for range 2 {
		acquire("ALGORITHM_FIXED_WINDOW", "bob", "login")
	}
	for range 15 {
		acquire("ALGORITHM_TOKEN_BUCKET", "search", "api")
	}
	statistics := func(algorithm, key string) map[string]string {
		body := fmt.Sprintf(`{"algorithm":%q,"key":%q}`, algorithm, key)
		resp, err := http.Post("http://"+silos[1].http+"/granary.ratelimit.v1.RateLimitService/Statistics", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var st map[string]any
		require.NoError(t, jsonDecode(resp.Body, &st))
		out := map[string]string{}
		for k, v := range st {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	want := map[string]map[string]string{
		"alice":  statistics("ALGORITHM_FIXED_WINDOW", "alice"),
		"bob":    statistics("ALGORITHM_FIXED_WINDOW", "bob"),
		"search": statistics("ALGORITHM_TOKEN_BUCKET", "search"),
	}
	require.Equal(t, "2", want["alice"]["totalFailedLeases"], "the API's answer: %v", want["alice"])

	dir := screenshotsDir(t)
	keysSeen := map[string][]string{}
	activations := map[string]int{}
	for _, s := range silos {
		var cluster clusterAnswer
		require.NoError(t, getJSON("http://"+s.http+"/cluster", &cluster))
		var page pageTables
		b.navigate(t, "http://"+s.admin+"/dashboard/")
		require.Eventually(t, func() bool {
			// Two snapshots drawn: the second has rates.
			return b.evaluate(readTables, &page) == nil && page.Draws >= 2 && len(page.Members) == 3
		}, 60*time.Second, 100*time.Millisecond, "silo %s's admin page draws a snapshot: %+v", s.name, page)

		assert.Equal(t, s.name, page.Self)
		for i, m := range cluster.Members {
			row := page.Members[i]
			assert.Equal(t, []string{m.Name, m.State, m.Status, m.Generation}, row[:4], "silo %s's page shows /cluster's member %s", s.name, m.Name)
		}
		for _, row := range page.Activations {
			n, err := strconv.Atoi(row[1])
			require.NoError(t, err)
			activations[row[0]] += n
		}
		for _, row := range page.Keys {
			keysSeen[row[1]] = append(keysSeen[row[1]], s.name)
			st := want[row[1]]
			require.NotNil(t, st, "a key the test used: %v", row)
			assert.Equal(t, apiNumber(st, "availablePermits"), row[3], "available of %s", row[1])
			assert.Equal(t, apiNumber(st, "totalFailedLeases"), row[5], "refused of %s", row[1])
			assert.Equal(t, apiNumber(st, "totalSuccessfulLeases"), row[6], "succeeded of %s", row[1])
		}
		for _, row := range page.Keys {
			if row[1] == "alice" {
				assert.Equal(t, []string{"fixed-window", "alice", "100%", "0", "5"}, row[:5])
				shot := b.screenshot(t)
				img, err := png.Decode(bytes.NewReader(shot))
				require.NoError(t, err)
				assert.Equal(t, 1280, img.Bounds().Dx())
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard-admin.png"), shot, 0o644))
			}
		}
		// The call totals are the silo's instruments, as /metrics says.
		metrics := scrape(t, "http://"+s.http+"/metrics")
		for _, row := range page.Calls {
			if row[1] != "Acquire" && row[1] != "AcquireAndCheckConfiguration" {
				continue // the dashboard's own calls go on while it is read
			}
			sum := 0.0
			for _, line := range metrics {
				if strings.HasPrefix(line, "granary_grain_calls_total{") && strings.Contains(line, `grain_type="`+row[0]+`"`) && strings.Contains(line, `grain_method="`+row[1]+`"`) {
					v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
					require.NoError(t, err)
					sum += v
				}
			}
			assert.Equal(t, strconv.FormatFloat(sum, 'f', -1, 64), row[2], "silo %s: calls of %s.%s", s.name, row[0], row[1])
		}
	}
	assert.Equal(t, 2, activations["granary.ratelimit.FixedWindowLimiter"], "alice's and bob's limiters, each on one silo")
	assert.Equal(t, 1, activations["granary.ratelimit.TokenBucketLimiter"])
	for key := range want {
		assert.Len(t, keysSeen[key], 1, "key %s is on exactly one silo's page: %v", key, keysSeen)
	}

	// The public port shows no key.
	var page pageTables
	b.navigate(t, "http://"+silos[0].http+"/dashboard/")
	require.Eventually(t, func() bool {
		return b.evaluate(readTables, &page) == nil && page.Draws >= 2 && len(page.Members) == 3
	}, 60*time.Second, 100*time.Millisecond, "the public page draws two snapshots")
	assert.True(t, page.KeysHidden)
	assert.Contains(t, page.KeysNote, "admin port")
	for key := range want {
		assert.NotContains(t, page.Text, key, "the public page names no key")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard-public.png"), b.screenshot(t), 0o644))
}

// apiNumber is a number of the API's JSON answer, which leaves zeros
// out.
func apiNumber(answer map[string]string, field string) string {
	if v, ok := answer[field]; ok {
		return v
	}
	return "0"
}

func scrape(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var lines []string
	buf := new(bytes.Buffer)
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	for line := range strings.SplitSeq(buf.String(), "\n") {
		lines = append(lines, line)
	}
	return lines
}
