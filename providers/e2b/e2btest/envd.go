package e2btest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// envd answers a request for sandbox id as envd behind E2B's edge would.
func (s *Server) envd(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	var state, token string
	if ok {
		state, token = sb.State, sb.Token
	}
	s.mu.Unlock()
	switch {
	case !ok:
		writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": id, "message": "The sandbox was not found", "code": 502})
		return
	case state == "paused":
		writeJSON(w, http.StatusConflict, map[string]any{"message": "The sandbox is paused", "code": 409, "canAutoResume": false})
		return
	case r.Header.Get("X-Access-Token") != token:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "invalid access token", "code": 401})
		return
	}
	switch {
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/files" && r.Method == http.MethodGet:
		s.download(w, r, id)
	case r.URL.Path == "/files" && r.Method == http.MethodPost:
		s.upload(w, r, id)
	case r.URL.Path == "/process.Process/Start" && r.Method == http.MethodPost:
		s.start(w, r, id)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "no such route", "code": 404})
	}
}

// local maps a sandbox path (absolute, or relative to the home) to this
// machine, under the sandbox's root directory (see HomeDir).
func (s *Server) local(id, p string) (string, error) {
	if !path.IsAbs(p) {
		p = path.Join(Home, p)
	}
	return filepath.Join(s.rootDir(id), filepath.FromSlash(path.Clean(p))), nil
}

func (s *Server) filePath(w http.ResponseWriter, r *http.Request, id string) (string, bool) {
	q := r.URL.Query()
	if u := q.Get("username"); u != "user" && u != "root" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": fmt.Sprintf("invalid username %q", u), "code": 400})
		return "", false
	}
	lp, err := s.local(id, q.Get("path"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 400})
		return "", false
	}
	return lp, true
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, id string) {
	lp, ok := s.filePath(w, r, id)
	if !ok {
		return
	}
	f, err := os.Open(lp)
	if errors.Is(err, os.ErrNotExist) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "file not found", "code": 404})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": err.Error(), "code": 500})
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.Copy(w, f)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, id string) {
	lp, ok := s.filePath(w, r, id)
	if !ok {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 400})
		return
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "no file part", "code": 400})
			return
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 400})
			return
		}
		if part.FormName() != "file" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]any{"message": err.Error(), "code": 500})
			return
		}
		f, err := os.Create(lp)
		if err == nil {
			_, err = io.Copy(f, part)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]any{"message": err.Error(), "code": 500})
			return
		}
		sp := r.URL.Query().Get("path")
		writeJSON(w, http.StatusOK, []map[string]string{{"path": sp, "name": path.Base(sp), "type": "file"}})
		return
	}
}

// start runs process.Process/Start: one Connect envelope in, a stream of
// ProcessEvent envelopes and an end-of-stream envelope out.
func (s *Server) start(w http.ResponseWriter, r *http.Request, id string) {
	if r.Header.Get("Content-Type") != "application/connect+json" {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"message": "want application/connect+json", "code": 415})
		return
	}
	var hdr [5]byte
	var req struct {
		Process struct {
			Cmd  string            `json:"cmd"`
			Args []string          `json:"args"`
			Envs map[string]string `json:"envs"`
			Cwd  *string           `json:"cwd"`
		} `json:"process"`
	}
	_, err := io.ReadFull(r.Body, hdr[:])
	if err == nil {
		body := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err = io.ReadFull(r.Body, body); err == nil {
			err = json.Unmarshal(body, &req)
		}
	}
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	endErr := func(code, msg string) {
		writeFrame(w, 2, map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	if err != nil {
		endErr("invalid_argument", "undecodable request: "+err.Error())
		return
	}
	cwd := Home
	if req.Process.Cwd != nil {
		cwd = *req.Process.Cwd
	}
	dir, err := s.local(id, cwd)
	if err == nil {
		if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
			err = fmt.Errorf("cwd %s does not exist", cwd)
		}
	}
	if err != nil {
		endErr("invalid_argument", err.Error())
		return
	}
	cmd := exec.CommandContext(r.Context(), req.Process.Cmd, req.Process.Args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + s.HomeDir(id), "PATH=" + os.Getenv("PATH"), "USER=user", "LC_ALL=C"}
	for k, v := range req.Process.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		endErr("not_found", err.Error())
		return
	}
	writeFrame(w, 0, map[string]any{"event": map[string]any{"start": map[string]any{"pid": cmd.Process.Pid}}})
	werr := cmd.Wait()
	for name, b := range map[string][]byte{"stdout": stdout.Bytes(), "stderr": stderr.Bytes()} {
		if len(b) > 0 {
			writeFrame(w, 0, map[string]any{"event": map[string]any{"data": map[string]any{name: b}}})
		}
	}
	end := map[string]any{"exitCode": cmd.ProcessState.ExitCode(), "exited": cmd.ProcessState.Exited(), "status": cmd.ProcessState.String()}
	if werr != nil && cmd.ProcessState.ExitCode() == -1 {
		end["error"] = werr.Error()
	}
	writeFrame(w, 0, map[string]any{"event": map[string]any{"end": end}})
	writeFrame(w, 2, map[string]any{})
}

func writeFrame(w io.Writer, flags byte, v any) {
	b, _ := json.Marshal(v)
	var hdr [5]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(b)))
	_, _ = w.Write(hdr[:])
	_, _ = w.Write(b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
