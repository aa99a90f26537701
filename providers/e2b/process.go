package e2b

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"lifeboat/providers"
	"lifeboat/providers/httpapi"
)

// maxOutput bounds what Exec keeps of each of stdout and stderr.
const maxOutput = 4 << 20

// maxFrame bounds one Connect message from envd.
const maxFrame = 16 << 20

// processConfig and startRequest are process.proto's ProcessConfig and
// StartRequest in the protobuf JSON mapping.
type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  string            `json:"cwd,omitempty"`
}

type startRequest struct {
	Process processConfig `json:"process"`
	Stdin   bool          `json:"stdin"`
}

// processEvent is process.proto's ProcessEvent (bytes are base64 in JSON,
// which encoding/json decodes into []byte).
type processEvent struct {
	Event struct {
		Start *struct {
			PID uint32 `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout []byte `json:"stdout"`
			Stderr []byte `json:"stderr"`
		} `json:"data"`
		End *struct {
			ExitCode int    `json:"exitCode"`
			Exited   bool   `json:"exited"`
			Status   string `json:"status"`
			Error    string `json:"error"`
		} `json:"end"`
	} `json:"event"`
}

// connectEnd is the Connect protocol's end-of-stream message.
type connectEnd struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// connectKinds maps Connect error codes (the gRPC codes) to kinds, as
// E2B's SDKs do in envd/rpc.py: unavailable is the sandbox timing out,
// not_found is not proof that the sandbox is gone.
var connectKinds = map[string]providers.Kind{
	"unauthenticated":     providers.KindUnauthorized,
	"permission_denied":   providers.KindPermission,
	"not_found":           providers.KindConflict,
	"invalid_argument":    providers.KindInvalid,
	"failed_precondition": providers.KindConflict,
	"resource_exhausted":  providers.KindRateLimited,
	"unavailable":         providers.KindUnavailable,
	"deadline_exceeded":   providers.KindUnavailable,
	"canceled":            providers.KindUnavailable,
}

// run starts argv (argv[0] is the program) in the sandbox with the
// absolute working directory cwd through process.Process/Start and waits
// for its end event.
func (e *envd) run(ctx context.Context, op string, cwd string, argv []string) (providers.ExecResult, error) {
	if err := providers.CheckCommand(Name, op, e.id, argv); err != nil {
		return providers.ExecResult{}, err
	}
	req := startRequest{Process: processConfig{Cmd: argv[0], Args: argv[1:], Cwd: cwd}}
	msg, err := json.Marshal(req)
	if err != nil {
		return providers.ExecResult{}, e.fail(op, providers.KindInvalid, "encoding the command: %v", err)
	}
	var body bytes.Buffer
	body.WriteByte(0)
	_ = binary.Write(&body, binary.BigEndian, uint32(len(msg)))
	body.Write(msg)
	h := e.header.Clone()
	h.Set("Content-Type", "application/connect+json")
	h.Set("Connect-Protocol-Version", "1")
	resp, err := e.p.data.Send(ctx, httpapi.Request{Op: op, Instance: e.id, Method: http.MethodPost, URL: e.base + "/process.Process/Start",
		Header: h, Body: &body, What: "process.Process/Start " + argv[0]})
	if err != nil {
		return providers.ExecResult{}, err
	}
	defer resp.Body.Close()
	var res providers.ExecResult
	ended := false
	for {
		flags, frame, err := readFrame(resp.Body)
		if err == io.EOF {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return res, e.fail(op, providers.KindUnavailable, "reading the process stream of %s: %w", argv[0], err)
		}
		if flags&0x02 != 0 {
			var end connectEnd
			if err := json.Unmarshal(frame, &end); err != nil {
				return res, e.fail(op, providers.KindUnavailable, "undecodable end of the process stream: %v", err)
			}
			if end.Error != nil {
				k, ok := connectKinds[end.Error.Code]
				if !ok {
					k = providers.KindUnavailable
				}
				return res, &providers.Error{Provider: Name, Op: op, Instance: e.id, Kind: k, Code: end.Error.Code,
					Err: fmt.Errorf("process.Process/Start %s: %s", argv[0], end.Error.Message)}
			}
			break
		}
		var ev processEvent
		if err := json.Unmarshal(frame, &ev); err != nil {
			return res, e.fail(op, providers.KindUnavailable, "undecodable process event: %v", err)
		}
		switch {
		case ev.Event.Data != nil:
			res.Stdout = appendBounded(res.Stdout, ev.Event.Data.Stdout)
			res.Stderr = appendBounded(res.Stderr, ev.Event.Data.Stderr)
		case ev.Event.End != nil:
			res.ExitCode, ended = ev.Event.End.ExitCode, true
			if !ev.Event.End.Exited && res.ExitCode == 0 {
				res.ExitCode = -1 // ended by a signal
			}
		}
	}
	if !ended {
		return res, e.fail(op, providers.KindUnavailable, "the process stream of %s ended without an end event", argv[0])
	}
	return res, nil
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err // io.EOF: the stream ended between frames
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("a message of %d bytes (more than %d)", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, fmt.Errorf("truncated message: %w", err)
	}
	return hdr[0], b, nil
}

func appendBounded(dst, b []byte) []byte {
	if room := maxOutput - len(dst); room < len(b) {
		b = b[:max(room, 0)]
	}
	return append(dst, b...)
}

func (e *envd) fail(op string, k providers.Kind, format string, args ...any) error {
	return &providers.Error{Provider: Name, Op: op, Instance: e.id, Kind: k, Err: fmt.Errorf(format, args...)}
}
