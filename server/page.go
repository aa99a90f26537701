package server

import (
	"embed"
	"net/http"
	"path"
)

//go:embed static
var static embed.FS

// pageHeaders are the headers of the status page and its assets: no
// framing, scripts only from this server, no Referer sent from the page
// (its URL may carry the token in its fragment).
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// page serves the status page. It holds no data: its script asks for a
// token and reads everything through the API with it.
func (s *Server) page(w http.ResponseWriter, r *http.Request) error {
	return s.serveStatic(w, "index.html")
}

func (s *Server) asset(w http.ResponseWriter, r *http.Request) error {
	return s.serveStatic(w, r.PathValue("file"))
}

func (s *Server) serveStatic(w http.ResponseWriter, name string) error {
	b, err := static.ReadFile(path.Join("static", path.Clean("/" + name)[1:]))
	if err != nil {
		return &apiError{http.StatusNotFound, "no_such_route", "no static file " + name}
	}
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	pageHeaders(w)
	w.Header().Set("Content-Type", types[path.Ext(name)])
	_, _ = w.Write(b)
	return nil
}
