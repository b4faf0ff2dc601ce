package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/websocket"
)

// browser is a headless Chromium driven over the DevTools protocol: one
// page, one command at a time.
type browser struct {
	cmd    *exec.Cmd
	page   *websocket.Conn
	nextID int
}

// chromiumFlags keep the browser off the network and out of the user's
// profile: it reaches only the silos on loopback.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--remote-allow-origins=http://127.0.0.1",
	"--window-size=1280,1000", "--hide-scrollbars",
}

// startBrowser starts Debian's chromium, or skips the test (fails it
// under GRANARY_CI=1) when it is not installed.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("GRANARY_CI") == "1" {
			t.Fatalf("chromium is not installed (GRANARY_CI=1): %v", err)
		}
		t.Skip("chromium is not installed: apt-get install chromium")
	}
	args := append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir(), "about:blank")
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helpers die with it
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	endpoint := make(chan string, 1)
	go func() {
		defer close(exited)
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			if url, ok := strings.CutPrefix(lines.Text(), "DevTools listening on "); ok {
				endpoint <- url
			}
		}
		_ = cmd.Wait()
	}()
	b := &browser{cmd: cmd}
	t.Cleanup(func() {
		if b.page != nil {
			_ = b.page.Close()
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	var browserURL string
	select {
	case browserURL = <-endpoint:
	case <-exited:
		t.Fatal("chromium exited before it listened")
	case <-time.After(60 * time.Second):
		t.Fatal("chromium did not say where it listens within a minute")
	}
	// The page's own endpoint: http://host:port/json/list names it.
	host := strings.TrimPrefix(browserURL, "ws://")
	host = host[:strings.Index(host, "/")]
	var pageURL string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + host + "/json/list")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var targets []struct{ Type, WebSocketDebuggerURL string }
		if json.NewDecoder(resp.Body).Decode(&targets) != nil {
			return false
		}
		for _, target := range targets {
			if target.Type == "page" {
				pageURL = target.WebSocketDebuggerURL
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "chromium lists its page")
	b.page, err = websocket.Dial(pageURL, "", "http://127.0.0.1")
	require.NoError(t, err)
	b.page.MaxPayloadBytes = 64 << 20 // screenshots
	return b
}

// call sends one command and returns its result, skipping the events
// that arrive in between.
func (b *browser) call(method string, params any, result any) error {
	b.nextID++
	id := b.nextID
	if err := b.page.SetDeadline(time.Now().Add(60 * time.Second)); err != nil {
		return err
	}
	if err := websocket.JSON.Send(b.page, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := websocket.JSON.Receive(b.page, &msg); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if msg.ID != id {
			continue // an event
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(msg.Result, result)
	}
}

// navigate opens url at the given viewport.
func (b *browser) navigate(t *testing.T, url string) {
	t.Helper()
	require.NoError(t, b.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}, nil))
	require.NoError(t, b.call("Page.navigate", map[string]any{"url": url}, nil))
}

// evaluate runs a JavaScript expression in the page and decodes its
// value into out.
func (b *browser) evaluate(expression string, out any) error {
	var reply struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := b.call("Runtime.evaluate", map[string]any{"expression": expression, "returnByValue": true}, &reply); err != nil {
		return err
	}
	if reply.ExceptionDetails != nil {
		return errors.New(reply.ExceptionDetails.Text)
	}
	return json.Unmarshal(reply.Result.Value, out)
}

// screenshot returns the page as PNG.
func (b *browser) screenshot(t *testing.T) []byte {
	t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	require.NoError(t, b.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot))
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	require.NoError(t, err)
	return png
}

// getJSON decodes the JSON answer of a GET into out.
func getJSON(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return json.Unmarshal(body, out)
}

func jsonDecode(r io.Reader, out any) error { return json.NewDecoder(r).Decode(out) }
