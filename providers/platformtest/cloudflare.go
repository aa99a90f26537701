package platformtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
)

// Cloudflare serves the Lifeboat bridge routes a small Worker puts in
// front of the Cloudflare Sandbox SDK (docs/providers.md defines them,
// after the SDK's getSandbox, exec, writeFile, readFile, destroy,
// createBackup and restoreBackup; developers.cloudflare.com/sandbox):
// Bearer token; PUT, GET and DELETE /v1/sandboxes/{id}; POST
// /v1/sandboxes/{id}/exec; PUT and GET /v1/sandboxes/{id}/files?path=;
// POST /v1/sandboxes/{id}/backups; POST
// /v1/sandboxes/{id}/backups/{backup}/restore; DELETE /v1/backups/{backup}.
// Errors are {"error":{"code","message"}}. A sandbox whose container
// restarted without its disk has state "lost": its data plane answers 409
// CONTAINER_DISK_LOST until a backup is restored into it.
func (s *Sandboxes) Cloudflare() http.Handler { return http.HandlerFunc((&cloudflare{s}).serve) }

type cloudflare struct{ s *Sandboxes }

func cfErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (c *cloudflare) serve(w http.ResponseWriter, r *http.Request) {
	if !c.s.gate(w, r, bearer(c.s.Key), func(w http.ResponseWriter) { cfErr(w, http.StatusUnauthorized, "UNAUTHORIZED", "bad bridge token") }) {
		return
	}
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(p) == 3 && p[0] == "v1" && p[1] == "backups" && r.Method == http.MethodDelete {
		if !c.s.DropSnapshot(p[2]) {
			cfErr(w, http.StatusNotFound, "BACKUP_NOT_FOUND", "no backup "+p[2])
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if len(p) < 3 || p[0] != "v1" || p[1] != "sandboxes" {
		cfErr(w, http.StatusNotFound, "NOT_FOUND", "no route "+r.URL.Path)
		return
	}
	id, rest := p[2], p[3:]
	if len(rest) == 0 && r.Method == http.MethodPut {
		c.s.count("PUT /v1/sandboxes/{id}")
		if b, ok := c.s.Get(id); ok {
			writeJSON(w, map[string]string{"id": b.ID, "state": b.State})
			return
		}
		b, err := c.s.Add(id, "running", nil)
		if err != nil {
			cfErr(w, http.StatusInternalServerError, "INTERNAL", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": b.ID, "state": b.State})
		return
	}
	b, ok := c.s.Get(id)
	if !ok {
		cfErr(w, http.StatusNotFound, "SANDBOX_NOT_FOUND", "the bridge has no sandbox "+id)
		return
	}
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		writeJSON(w, map[string]string{"id": b.ID, "state": b.State})
		return
	case len(rest) == 0 && r.Method == http.MethodDelete:
		c.s.Remove(id)
		w.WriteHeader(http.StatusNoContent)
		return
	case len(rest) == 3 && rest[0] == "backups" && rest[2] == "restore" && r.Method == http.MethodPost:
		var dir string
		c.s.mu.Lock()
		src, ok := c.s.snaps[rest[1]]
		c.s.mu.Unlock()
		if !ok {
			cfErr(w, http.StatusNotFound, "BACKUP_NOT_FOUND", "no backup "+rest[1])
			return
		}
		b, _ := os.ReadFile(src + ".dir")
		dir = string(b)
		if err := c.s.Restore(r.Context(), id, dir, rest[1]); err != nil {
			cfErr(w, http.StatusInternalServerError, "RESTORE_FAILED", err.Error())
			return
		}
		c.s.Update(id, func(b *Box) { b.State = "running" })
		writeJSON(w, map[string]string{"id": rest[1], "dir": dir})
		return
	}
	if b.State != "running" {
		cfErr(w, http.StatusConflict, "CONTAINER_DISK_LOST", "the sandbox's container restarted without its disk; restore a backup or recreate it")
		return
	}
	switch {
	case len(rest) == 1 && rest[0] == "exec" && r.Method == http.MethodPost:
		var body struct {
			Argv []string `json:"argv"`
			Cwd  string   `json:"cwd"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Argv) == 0 {
			cfErr(w, http.StatusBadRequest, "INVALID_REQUEST", "argv is required")
			return
		}
		if body.Cwd == "" {
			body.Cwd = "/workspace"
		}
		code, out, errOut, err := c.s.Run(r.Context(), id, body.Cwd, body.Argv)
		if err != nil {
			cfErr(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
			return
		}
		writeJSON(w, map[string]any{"exitCode": code, "stdout": string(out), "stderr": string(errOut)})
	case len(rest) == 1 && rest[0] == "files" && r.Method == http.MethodPut:
		hp, err := c.s.HostPath(id, r.URL.Query().Get("path"))
		var f *os.File
		if err == nil {
			f, err = os.Create(hp)
		}
		if err == nil {
			_, err = io.Copy(f, r.Body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			cfErr(w, http.StatusBadRequest, "WRITE_FAILED", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case len(rest) == 1 && rest[0] == "files" && r.Method == http.MethodGet:
		hp, err := c.s.HostPath(id, r.URL.Query().Get("path"))
		var f *os.File
		if err == nil {
			f, err = os.Open(hp)
		}
		if errors.Is(err, fs.ErrNotExist) {
			cfErr(w, http.StatusNotFound, "FILE_NOT_FOUND", "no file "+r.URL.Query().Get("path"))
			return
		}
		if err != nil {
			cfErr(w, http.StatusBadRequest, "READ_FAILED", err.Error())
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, f)
	case len(rest) == 1 && rest[0] == "backups" && r.Method == http.MethodPost:
		var body struct {
			Dir string `json:"dir"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !strings.HasPrefix(body.Dir, "/") {
			cfErr(w, http.StatusBadRequest, "INVALID_REQUEST", "dir must be an absolute path")
			return
		}
		c.s.mu.Lock()
		c.s.next++
		bid := fmt.Sprintf("bak-%04d", c.s.next)
		c.s.mu.Unlock()
		if err := c.s.Copy(r.Context(), id, body.Dir, bid); err != nil {
			cfErr(w, http.StatusInternalServerError, "BACKUP_FAILED", err.Error())
			return
		}
		c.s.mu.Lock()
		dst := c.s.snaps[bid]
		c.s.mu.Unlock()
		_ = os.WriteFile(dst+".dir", []byte(body.Dir), 0o600)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": bid, "dir": body.Dir})
	default:
		cfErr(w, http.StatusNotFound, "NOT_FOUND", "no route "+r.Method+" "+r.URL.Path)
	}
}
