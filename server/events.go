package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"lifeboat/recovery"
)

// Message is one numbered change as every event stream sends it.
type Message struct {
	Seq       uint64    `json:"seq"`
	Type      string    `json:"type"`
	Workspace string    `json:"workspace,omitempty"`
	Time      time.Time `json:"time"`
	Data      any       `json:"data"`
	raw       []byte    // the encoded message, shared by every stream
}

// Events numbers changes and sends each to every subscriber in the same
// order, so every client sees one state. The newest messages are kept so
// a stream that reconnects (Last-Event-ID) misses nothing. A subscriber
// that falls a full buffer behind is dropped (its stream ends) and
// reconnects.
//
// Sequence numbers start again at 1 in every process, so an event id is
// "EPOCH-SEQ": the epoch is chosen at random when the hub is made, and an
// id of another epoch (an earlier server process) is never taken for one
// of this process.
type Events struct {
	now   func() time.Time
	epoch string

	mu     sync.Mutex
	seq    uint64
	ring   []Message // the newest ringSize messages, oldest first
	subs   map[*subscriber]struct{}
	closed bool
}

const (
	ringSize   = 256
	subsBuffer = 64
)

type subscriber struct{ ch chan Message }

// NewEvents returns an empty event hub with a new epoch.
func NewEvents() *Events {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &Events{now: time.Now, epoch: hex.EncodeToString(b[:]), subs: map[*subscriber]struct{}{}}
}

// Epoch is this hub's epoch, the first part of its event ids.
func (e *Events) Epoch() string { return e.epoch }

// ID is the event id of sequence number seq: "EPOCH-SEQ".
func (e *Events) ID(seq uint64) string { return e.epoch + "-" + strconv.FormatUint(seq, 10) }

// parseEventID reads a Last-Event-ID: "EPOCH-SEQ", or a bare sequence
// number (the ids of servers before epochs; epoch ""). The epoch is 1 to
// 64 lowercase letters and digits.
func parseEventID(v string) (epoch string, seq uint64, err error) {
	num := v
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		epoch, num = v[:i], v[i+1:]
		if epoch == "" || len(epoch) > 64 || strings.IndexFunc(epoch, func(c rune) bool { return (c < 'a' || c > 'z') && (c < '0' || c > '9') }) >= 0 {
			return "", 0, fmt.Errorf("Last-Event-ID %.80q is not an event id (EPOCH-SEQ)", v)
		}
	}
	seq, err = strconv.ParseUint(num, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("Last-Event-ID %.80q is not an event id (EPOCH-SEQ)", v)
	}
	return epoch, seq, nil
}

// Publish numbers one change and sends it to every subscriber.
func (e *Events) Publish(typ, ws string, data any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.seq++
	m := Message{Seq: e.seq, Type: typ, Workspace: ws, Time: e.now().UTC(), Data: data}
	raw, err := json.Marshal(m)
	if err != nil {
		raw, _ = json.Marshal(Message{Seq: m.Seq, Type: "error", Workspace: ws, Time: m.Time, Data: err.Error()})
	}
	m.raw = raw
	e.ring = append(e.ring, m)
	if len(e.ring) > ringSize {
		e.ring = append(e.ring[:0:0], e.ring[len(e.ring)-ringSize:]...)
	}
	for s := range e.subs {
		select {
		case s.ch <- m:
		default: // too slow: drop it, it reconnects with Last-Event-ID
			delete(e.subs, s)
			close(s.ch)
		}
	}
}

// Receipt publishes a lifecycle receipt; use it as recovery.Config.OnReceipt.
func (e *Events) Receipt(r recovery.Receipt) { e.Publish("receipt", r.Workspace, r) }

// subscribe registers a subscriber. With replay, it also returns the
// messages after seq "after" that are still kept (complete is false when
// some were already dropped). seq is the current sequence number.
func (e *Events) subscribe(after uint64, replay bool) (s *subscriber, backlog []Message, complete bool, seq uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s = &subscriber{ch: make(chan Message, subsBuffer)}
	if e.closed {
		close(s.ch)
		return s, nil, true, e.seq
	}
	e.subs[s] = struct{}{}
	if !replay || after > e.seq {
		return s, nil, !replay, e.seq
	}
	complete = after >= e.seq || (len(e.ring) > 0 && e.ring[0].Seq <= after+1)
	for _, m := range e.ring {
		if m.Seq > after {
			backlog = append(backlog, m)
		}
	}
	return s, backlog, complete, e.seq
}

func (e *Events) unsubscribe(s *subscriber) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.subs[s]; ok {
		delete(e.subs, s)
		close(s.ch)
	}
}

// Close ends every stream; later publishes are dropped.
func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for s := range e.subs {
		delete(e.subs, s)
		close(s.ch)
	}
}
