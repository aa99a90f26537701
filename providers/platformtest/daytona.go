package platformtest

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Daytona serves Daytona's REST API (reference: daytonaio/daytona
// apps/api/src/sandbox/controllers/sandbox.controller.ts and
// toolbox.deprecated.controller.ts; errors per daytona.io/docs
// python-sdk shared errors): Bearer API key; POST /sandbox; GET
// /sandbox?labels={json}; GET and DELETE /sandbox/{id}; POST
// /sandbox/{id}/stop and /start; PUT /sandbox/{id}/labels; and the toolbox
// through the API: GET /toolbox/{id}/toolbox/files/download?path=, POST
// .../files/upload?path= (multipart field "file"), POST
// .../process/execute ({"command","cwd"} -> {"exitCode","result"}, the
// command split into words as a shell would, without running a shell).
// Errors are {"statusCode","message","error"}; the toolbox of a stopped
// sandbox answers 400 "... Is the Sandbox started?".
func (s *Sandboxes) Daytona() http.Handler { return http.HandlerFunc((&daytona{s}).serve) }

type daytona struct{ s *Sandboxes }

func daytonaErr(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"statusCode": status, "message": msg, "error": http.StatusText(status)})
}

func daytonaSandbox(b Box) map[string]any {
	return map[string]any{"id": b.ID, "organizationId": "org", "snapshot": "daytonaio/sandbox", "user": "daytona", "env": map[string]string{},
		"labels": b.Labels, "public": false, "target": "us", "cpu": 1, "gpu": 0, "memory": 1, "disk": 3, "state": b.State,
		"createdAt": time.Now().UTC().Format(time.RFC3339)}
}

func (d *daytona) serve(w http.ResponseWriter, r *http.Request) {
	if !d.s.gate(w, r, bearer(d.s.Key), func(w http.ResponseWriter) { daytonaErr(w, http.StatusUnauthorized, "Unauthorized") }) {
		return
	}
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case p[0] == "sandbox":
		d.sandbox(w, r, p[1:])
	case p[0] == "toolbox" && len(p) >= 4 && p[2] == "toolbox":
		d.toolbox(w, r, p[1], strings.Join(p[3:], "/"))
	default:
		daytonaErr(w, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

func (d *daytona) sandbox(w http.ResponseWriter, r *http.Request, p []string) {
	if len(p) == 0 {
		switch r.Method {
		case http.MethodGet:
			want := map[string]string{}
			if l := r.URL.Query().Get("labels"); l != "" {
				if err := json.Unmarshal([]byte(l), &want); err != nil {
					daytonaErr(w, http.StatusBadRequest, "labels must be a JSON object")
					return
				}
			}
			out := []any{}
			for _, b := range d.s.List(want) {
				out = append(out, daytonaSandbox(b))
			}
			writeJSON(w, out)
		case http.MethodPost:
			d.s.count("POST /sandbox")
			var body struct {
				Labels map[string]string `json:"labels"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				daytonaErr(w, http.StatusBadRequest, err.Error())
				return
			}
			b, err := d.s.Add("", "started", body.Labels)
			if err != nil {
				daytonaErr(w, http.StatusInternalServerError, err.Error())
				return
			}
			_ = os.MkdirAll(filepath.Join(b.Dir, "home", "daytona"), 0o755)
			writeJSON(w, daytonaSandbox(b))
		default:
			daytonaErr(w, http.StatusNotFound, "Cannot "+r.Method+" /sandbox")
		}
		return
	}
	id := p[0]
	b, ok := d.s.Get(id)
	if !ok {
		daytonaErr(w, http.StatusNotFound, "Sandbox with ID or name "+id+" not found")
		return
	}
	switch {
	case len(p) == 1 && r.Method == http.MethodGet:
		writeJSON(w, daytonaSandbox(b))
	case len(p) == 1 && r.Method == http.MethodDelete:
		d.s.Remove(id)
		w.WriteHeader(http.StatusOK)
	case len(p) == 2 && p[1] == "stop" && r.Method == http.MethodPost:
		d.s.Update(id, func(b *Box) { b.State = "stopped" })
		w.WriteHeader(http.StatusOK)
	case len(p) == 2 && p[1] == "start" && r.Method == http.MethodPost:
		d.s.Update(id, func(b *Box) { b.State = "started" })
		b, _ = d.s.Get(id)
		writeJSON(w, daytonaSandbox(b))
	case len(p) == 2 && p[1] == "labels" && r.Method == http.MethodPut:
		var body struct {
			Labels map[string]string `json:"labels"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			daytonaErr(w, http.StatusBadRequest, err.Error())
			return
		}
		d.s.Update(id, func(b *Box) { b.Labels = body.Labels })
		writeJSON(w, map[string]any{"labels": body.Labels})
	default:
		daytonaErr(w, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

func (d *daytona) toolbox(w http.ResponseWriter, r *http.Request, id, route string) {
	b, ok := d.s.Get(id)
	if !ok {
		daytonaErr(w, http.StatusNotFound, "Sandbox with ID or name "+id+" not found")
		return
	}
	if b.State != "started" {
		daytonaErr(w, http.StatusBadRequest, "Failed to connect to the sandbox toolbox. Is the Sandbox started?")
		return
	}
	switch {
	case route == "files/download" && r.Method == http.MethodGet:
		hp, err := d.s.HostPath(id, r.URL.Query().Get("path"))
		var f *os.File
		if err == nil {
			f, err = os.Open(hp)
		}
		if errors.Is(err, fs.ErrNotExist) {
			daytonaErr(w, http.StatusNotFound, "file not found")
			return
		}
		if err != nil {
			daytonaErr(w, http.StatusBadRequest, err.Error())
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, f)
	case route == "files/upload" && r.Method == http.MethodPost:
		f, _, err := r.FormFile("file")
		if err != nil {
			daytonaErr(w, http.StatusBadRequest, "a multipart field file is required: "+err.Error())
			return
		}
		defer f.Close()
		hp, err := d.s.HostPath(id, r.URL.Query().Get("path"))
		var out *os.File
		if err == nil {
			out, err = os.Create(hp)
		}
		if err == nil {
			_, err = io.Copy(out, f)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			daytonaErr(w, http.StatusBadRequest, err.Error())
			return
		}
		w.WriteHeader(http.StatusOK)
	case route == "process/execute" && r.Method == http.MethodPost:
		var body struct {
			Command string `json:"command"`
			Cwd     string `json:"cwd"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			daytonaErr(w, http.StatusBadRequest, err.Error())
			return
		}
		argv, err := ShellWords(body.Command)
		if err != nil || len(argv) == 0 {
			daytonaErr(w, http.StatusBadRequest, "bad command")
			return
		}
		if body.Cwd == "" {
			body.Cwd = "/home/daytona"
		}
		code, out, errOut, err := d.s.Run(r.Context(), id, body.Cwd, argv)
		if err != nil {
			daytonaErr(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, map[string]any{"exitCode": code, "result": string(out) + string(errOut)})
	default:
		daytonaErr(w, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// ShellWords splits a command line into words as a POSIX shell would for
// plain words, 'single-quoted' and "double-quoted" strings and backslash
// escapes (no expansions).
func ShellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			in = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
