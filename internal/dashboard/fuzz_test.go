package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// The dashboard's only input is the request: its path and method. None
// may panic it or answer more than the routes it has.
func FuzzDashboardRequests(f *testing.F) {
	s, reg := startSilo(f)
	d, err := New(s, reg, Options{})
	if err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	for _, seed := range []string{Path, SnapshotPath, Path + "app.js", Path + "../go.mod", "/dashboard", Path + "%2e%2e/x", Path + "assets/app.js"} {
		f.Add("GET", seed)
	}
	f.Add("POST", SnapshotPath)
	f.Fuzz(func(t *testing.T, method, path string) {
		u, err := url.ParseRequestURI(path)
		if err != nil || (method != "GET" && method != "POST" && method != "HEAD") {
			return
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "/", nil)
		req.URL = u
		mux.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusMovedPermanently, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusBadRequest, http.StatusTemporaryRedirect:
		default:
			t.Fatalf("%s %s: %d", method, path, rec.Code)
		}
	})
}
