package main

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
	Columns     []string   `json:"columns"` // the activations table's head: grain type, a silo each, all
	Activations [][]string `json:"activations"`
	Limiters    [][]string `json:"limiters"`
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
    members: rows('members'), activations: rows('activations'), limiters: rows('limiters'), keys: rows('keys'), calls: rows('calls'),
    columns: [...document.querySelectorAll('#activations thead th')].map(th => th.textContent),
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
// what each page shows of the whole cluster is checked against the
// silos' own answers: /cluster, /locate, the API's Statistics, each
// silo's /metrics.
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
		// LAN timings: on a loaded machine the fast ones declare live
		// silos dead, and their grains move while the pages are read.
		_, gossip := startProcess(t, bin, name, seed, "-config", config, "-http", ports.http, "-admin", ports.admin, "-gateway", "none", "-timings", "lan")
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
		acquireThrough(t, silos[0].http, fmt.Sprintf(`{"algorithm":%q,"key":%q,"config":%q}`, algorithm, key, config))
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
	names := []string{"a", "b", "c"}
	// One pass reads every admin page and the cluster's answers beside it
	// and lists what disagrees. On a loaded machine a member may turn
	// suspect between two reads, so the passes repeat until one agrees.
	var adminShot []byte
	observe := func() (problems []string) {
		bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
		defer func() { t.Logf("a pass over the pages: %d problems %v", len(problems), problems) }()
		// Asked again each pass, which also activates a limiter a
		// loaded silo let go (a silo wrongly declared dead hands its
		// grains over).
		want := map[string]map[string]string{
			"alice":  statistics("ALGORITHM_FIXED_WINDOW", "alice"),
			"bob":    statistics("ALGORITHM_FIXED_WINDOW", "bob"),
			"search": statistics("ALGORITHM_TOKEN_BUCKET", "search"),
		}
		// Each silo's own answers: where the directory says each key's
		// grain lives, how many activations each silo's /metrics counts,
		// and its call totals.
		lives := map[string]string{}
		ownActivations := map[string]map[string]int{} // silo, grain type: activations
		for key, grainType := range map[string]string{"alice": fixedWindowType, "bob": fixedWindowType, "search": tokenBucketType} {
			var at locateAnswer
			require.NoError(t, getJSON(fmt.Sprintf("http://%s/locate?type=%s&key=%s", silos[0].admin, grainType, key), &at))
			lives[key] = at.Silo
			if ownActivations[at.Silo] == nil {
				ownActivations[at.Silo] = map[string]int{}
			}
			ownActivations[at.Silo][grainType]++
		}
		gauges := map[string]string{}
		callTotals := map[string]float64{} // grain type and method, over the three silos
		for _, s := range silos {
			for _, line := range scrape(t, "http://"+s.http+"/metrics") {
				value := line[strings.LastIndexByte(line, ' ')+1:]
				switch {
				case strings.HasPrefix(line, "granary_activations{") || strings.HasPrefix(line, "granary_activations "):
					gauges[s.name] = value
				case strings.HasPrefix(line, "granary_grain_calls_total{"):
					v, err := strconv.ParseFloat(value, 64)
					require.NoError(t, err)
					callTotals[between(line, `grain_type="`, `"`)+"/"+between(line, `grain_method="`, `"`)] += v
				}
			}
		}
		for _, s := range silos {
			var page pageTables
			b.navigate(t, "http://"+s.admin+"/dashboard/")
			require.Eventually(t, func() bool {
				// Two snapshots drawn: the second has rates.
				return b.evaluate(readTables, &page) == nil && page.Draws >= 2 && len(page.Members) == 3
			}, 60*time.Second, 100*time.Millisecond, "silo %s's admin page draws a snapshot: %+v", s.name, page)
			var cluster clusterAnswer
			require.NoError(t, getJSON("http://"+s.http+"/cluster", &cluster))
			if page.Self != s.name {
				bad("silo %s's page names itself %q", s.name, page.Self)
			}
			for i, m := range cluster.Members {
				if want, got := []string{m.Name, m.State, m.Status, m.Generation}, page.Members[i][:4]; !slices.Equal(want, got) {
					bad("silo %s's page shows member %v, /cluster %v", s.name, got, want)
				}
				if row := page.Members[i]; row[8] != "ok" || row[5] != gauges[m.Name] {
					bad("silo %s's page shows silo %s with %s activations and part %q; its /metrics says %s", s.name, m.Name, row[5], row[8], gauges[m.Name])
				}
			}
			// Activations per grain type and silo, on one page, as each
			// silo counts them.
			if want := append(append([]string{"grain type"}, names...), "all"); !slices.Equal(page.Columns, want) {
				bad("silo %s's activations table has columns %v", s.name, page.Columns)
				continue
			}
			shown := map[string]bool{}
			for _, row := range page.Activations {
				shown[row[0]] = true
				for i, name := range names {
					if want := strconv.Itoa(ownActivations[name][row[0]]); row[1+i] != want {
						bad("silo %s's page shows %s activations of %s on %s; by the directory, %s", s.name, row[1+i], row[0], name, want)
					}
				}
			}
			for _, grainType := range []string{fixedWindowType, tokenBucketType} {
				if !shown[grainType] {
					bad("silo %s's page shows no activation of %s", s.name, grainType)
				}
			}
			// The cluster's hottest keys, each once, with its silo.
			keysSeen := map[string]int{}
			for _, row := range page.Keys {
				keysSeen[row[1]]++
				st := want[row[1]]
				require.NotNil(t, st, "a key the test used: %v", row)
				if row[2] != lives[row[1]] {
					bad("silo %s's page shows key %s on %s; the directory says %s", s.name, row[1], row[2], lives[row[1]])
				}
				if got, want := []string{row[4], row[6], row[7]}, []string{apiNumber(st, "availablePermits"), apiNumber(st, "totalFailedLeases"), apiNumber(st, "totalSuccessfulLeases")}; !slices.Equal(got, want) {
					bad("silo %s's page shows key %s with available, refused, succeeded %v; the API says %v", s.name, row[1], got, want)
				}
				available, errA := strconv.Atoi(row[4])
				limit, errL := strconv.Atoi(row[5])
				if errA != nil || errL != nil || limit == 0 || row[3] != fmt.Sprintf("%d%%", int(math.Round(100*(1-float64(available)/float64(limit))))) {
					bad("key %s: utilization %s of available %s and limit %s", row[1], row[3], row[4], row[5])
				}
			}
			for key := range want {
				if keysSeen[key] != 1 {
					bad("silo %s's page shows key %s %d times, want once", s.name, key, keysSeen[key])
				}
			}
			if s.name == "b" {
				adminShot = b.screenshot(t)
			}
			// The call totals are the silos' instruments summed, as their
			// /metrics say.
			for _, row := range page.Calls {
				if row[1] != "Acquire" && row[1] != "AcquireAndCheckConfiguration" {
					continue // the dashboard's own calls go on while it is read
				}
				if want := strconv.FormatFloat(callTotals[row[0]+"/"+row[1]], 'f', -1, 64); row[2] != want {
					bad("silo %s: %s calls of %s.%s on the page, %s in the silos' /metrics", s.name, row[2], row[0], row[1], want)
				}
			}
		}
		return problems
	}
	var problems []string
	require.Eventually(t, func() bool { problems = observe(); return len(problems) == 0 },
		3*time.Minute, time.Millisecond, "the pages and the cluster never agreed; last: %v", &problems)
	img, err := png.Decode(bytes.NewReader(adminShot))
	require.NoError(t, err)
	assert.Equal(t, 1280, img.Bounds().Dx())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard-admin.png"), adminShot, 0o644))

	// The public port shows no key.
	var page pageTables
	b.navigate(t, "http://"+silos[0].http+"/dashboard/")
	require.Eventually(t, func() bool {
		return b.evaluate(readTables, &page) == nil && page.Draws >= 2 && len(page.Members) == 3
	}, 60*time.Second, 100*time.Millisecond, "the public page draws two snapshots")
	assert.True(t, page.KeysHidden)
	assert.Contains(t, page.KeysNote, "admin port")
	for key := range want {
		assert.NotContains(t, page.Text, key, "the public page names no key of any silo")
	}
	assert.Equal(t, append(append([]string{"grain type"}, names...), "all"), page.Columns, "the public page shows every silo's activations")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard-public.png"), b.screenshot(t), 0o644))
}

// acquireThrough posts an Acquire to the HTTP port at addr until it is
// answered: 503 is a call that was not delivered, as while a cluster that
// just formed settles its directory.
func acquireThrough(t *testing.T, addr, body string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Post("http://"+addr+"/granary.ratelimit.v1.RateLimitService/Acquire", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, resp.StatusCode)
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "acquire %s", body)
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

// The limiter grain types, as /locate names them.
const (
	fixedWindowType = "granary.ratelimit.FixedWindowLimiter"
	tokenBucketType = "granary.ratelimit.TokenBucketLimiter"
)

// between returns what s has between the first from and the next to.
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}
