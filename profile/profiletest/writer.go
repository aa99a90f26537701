// Package profiletest holds test support for browser profiles that needs a
// real second process: a stand-in for a browser that writes SQLite
// databases and is then paused (SIGSTOP) in the middle of a write
// transaction, with committed rows still only in the write-ahead log. It
// is used by the tests of profile/ and cmd/lifeboat; nothing else imports
// it.
//
// The writer is the test binary itself, started again with an environment
// variable: a package that uses StartWriter must have
// func TestMain(m *testing.M) { profiletest.Main(m) }.
package profiletest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite" // the driver a browser stand-in writes with

	"lifeboat/internal/osutil"
)

const writerEnv = "LIFEBOAT_PROFILETEST_WRITER"

// Options say what the writer does before it stops itself.
type Options struct {
	// WAL is the path of a database the writer creates in WAL mode: rows
	// WALCommitted go into the database file (checkpointed), rows
	// WALOnly are committed to the -wal only, and an open write
	// transaction (see uncommitted) spills uncommitted frames into the
	// -wal. Empty: none.
	WAL string
	// Journal is the path of a database the writer creates in rollback
	// journal mode: JournalCommitted rows committed, then an open write
	// transaction (see uncommitted) that spills into the database file
	// and leaves a hot -journal. Empty: none.
	Journal string
	// Held is the path of a database the writer creates in rollback
	// journal mode and then holds in exclusive locking mode after a
	// committed write, its -journal emptied: how a browser leaves a
	// database it has open between transactions. Empty: none.
	Held string
	// ParentLock, when set, is a file the writer holds a POSIX record lock
	// on, as Firefox holds .parentlock.
	ParentLock string
	// Child starts a child process of the writer (as Chromium's network
	// service is one), which the writer stops before itself when
	// StopChild is set and leaves running otherwise.
	Child, StopChild bool
}

// Row counts of the writer's databases.
const (
	WALCommitted     = 3  // rows 1..3: in the database file
	WALOnly          = 3  // rows 4..6: committed, only in the -wal
	JournalCommitted = 3  // rows 1..3 of the rollback-journal database
	UncommittedRows  = 64 // large rows the open transaction writes, never committed
	rowBytes         = 4096
)

// Report is what the writer tells the test once it is ready to stop.
type Report struct {
	ChildPID int `json:"child_pid"`
	// WALGrew: the open transaction wrote uncommitted frames to the
	// -wal (it is larger than after the last commit).
	WALGrew bool `json:"wal_grew"`
	// JournalHot: the open transaction wrote into the database file and
	// left a -journal beside it.
	JournalHot bool `json:"journal_hot"`
}

// Writer is a started, stopped writer process.
type Writer struct {
	PID    int
	Report Report
	cmd    *exec.Cmd
}

// StartWriter starts the writer and returns once it has done what o asks
// and is stopped (SIGSTOP, all its threads in state T). The caller must
// Kill it.
func StartWriter(o Options) (*Writer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+string(cfg))
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return nil, err
	}
	w := &Writer{PID: cmd.Process.Pid, cmd: cmd}
	line, rerr := bufio.NewReader(pr).ReadString('\n')
	if rerr != nil {
		w.Kill()
		return nil, fmt.Errorf("the writer process ended before it was ready: %w", rerr)
	}
	if err := json.Unmarshal([]byte(line), &w.Report); err != nil {
		w.Kill()
		return nil, fmt.Errorf("the writer's report %q: %w", line, err)
	}
	// The writer stops itself after the report; wait until it has.
	if err := waitStopped(w.PID); err != nil {
		w.Kill()
		return nil, err
	}
	return w, nil
}

// waitStopped waits for the child pid to enter the stopped state.
func waitStopped(pid int) error {
	for {
		var ws syscall.WaitStatus
		_, err := osutil.IgnoringEINTR2(func() (int, error) { return syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil) })
		if err != nil {
			return fmt.Errorf("waiting for process %d to stop: %w", pid, err)
		}
		if ws.Stopped() {
			return nil
		}
		return fmt.Errorf("process %d ended instead of stopping: %v", pid, ws)
	}
}

// Kill ends the writer and its child. The child is killed first, while
// the writer is stopped: it cannot reap the child, so the child's PID
// still names it (at worst a zombie) and cannot have been reused.
func (w *Writer) Kill() {
	if w.Report.ChildPID > 0 {
		_ = syscall.Kill(w.Report.ChildPID, syscall.SIGKILL)
	}
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
}

// Main is the TestMain of a package that uses StartWriter: it runs the
// writer when this process was started as one, and the tests otherwise.
//
// The after functions run once the tests ended (servers a test binary
// started for all its tests are stopped there).
func Main(m *testing.M, after ...func()) {
	runWriterIfChild()
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// runWriterIfChild runs the writer and exits when this process was
// started by StartWriter; otherwise it returns at once.
func runWriterIfChild() {
	cfg, ok := os.LookupEnv(writerEnv)
	if !ok {
		return
	}
	if cfg == "child" {
		sleepForever() // a child that only exists; it dies with its parent
	}
	var o Options
	err := json.Unmarshal([]byte(cfg), &o)
	if err == nil {
		err = runWriter(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profiletest writer:", err)
		os.Exit(1)
	}
	// runWriter stopped this process; it is killed while stopped.
	os.Exit(0)
}

func runWriter(o Options) error {
	ctx := context.Background()
	var rep Report
	if o.ParentLock != "" {
		f, err := os.OpenFile(o.ParentLock, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
			return err
		}
	}
	if o.WAL != "" {
		grew, err := writeWAL(ctx, o.WAL)
		if err != nil {
			return fmt.Errorf("WAL database: %w", err)
		}
		rep.WALGrew = grew
	}
	if o.Journal != "" {
		hot, err := writeJournal(ctx, o.Journal)
		if err != nil {
			return fmt.Errorf("journal database: %w", err)
		}
		rep.JournalHot = hot
	}
	if o.Held != "" {
		if err := holdExclusive(ctx, o.Held); err != nil {
			return fmt.Errorf("held database: %w", err)
		}
	}
	if o.Child {
		pid, err := startChild(o.StopChild)
		if err != nil {
			return err
		}
		rep.ChildPID = pid
	}
	b, _ := json.Marshal(rep)
	report := os.NewFile(3, "report")
	if _, err := report.Write(append(b, '\n')); err != nil {
		return err
	}
	// Stop every thread of this process here, in the middle of the open
	// transactions: the state a paused browser leaves on disk.
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		return err
	}
	sleepForever() // killed while stopped
	return nil
}

// sleepForever blocks in a system call (which, unlike select {}, the
// runtime does not take for a deadlock) until a signal ends the process.
func sleepForever() {
	for {
		_ = unix.Pause()
	}
}

// startChild starts a child process that dies with this one, stopped
// (and waited for until it is) when stop is set.
func startChild(stop bool) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	c := exec.Command(exe, "-test.run=^$")
	c.Env = append(os.Environ(), writerEnv+"=child")
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		return 0, err
	}
	pid := c.Process.Pid
	if stop {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return 0, err
		}
		if err := waitStopped(pid); err != nil {
			return 0, err
		}
	}
	return pid, nil
}

// holdExclusive creates database p, commits a row in exclusive locking
// mode (the connection keeps its lock from then on) and empties its
// -journal, which an exclusive connection keeps with its header zeroed.
func holdExclusive(ctx context.Context, p string) error {
	c, err := open(ctx, p, "TRUNCATE")
	if err != nil {
		return err
	}
	if err := exec1(ctx, c, "PRAGMA locking_mode=EXCLUSIVE", "CREATE TABLE t(id INTEGER PRIMARY KEY, what TEXT)",
		"INSERT INTO t(what) VALUES('committed')"); err != nil {
		return err
	}
	return os.Truncate(p+"-journal", 0)
}

// open opens p with one connection that stays open.
func open(ctx context.Context, p, mode string) (*sql.Conn, error) {
	u := url.URL{Scheme: "file", Path: p, RawQuery: url.Values{"_pragma": {"journal_mode(" + mode + ")"}}.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	return db.Conn(ctx) // never closed: the process is stopped and killed
}

func exec1(ctx context.Context, c *sql.Conn, stmts ...string) error {
	for _, s := range stmts {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func insert(ctx context.Context, c *sql.Conn, from, n int, what string) error {
	for i := from; i < from+n; i++ {
		if _, err := c.ExecContext(ctx, "INSERT INTO t(id, what, pad) VALUES(?, ?, randomblob(?))", i, what, rowBytes); err != nil {
			return err
		}
	}
	return nil
}

// schema: t holds the rows a check counts; pad takes the open
// transaction's bulk.
const schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, what TEXT, pad BLOB); CREATE TABLE pad(id INTEGER PRIMARY KEY, pad BLOB)"

// uncommitted runs the open transaction: it changes row 1 of t and adds a
// row to t, then writes UncommittedRows large rows into pad, which push
// t's changed pages out of the small page cache, into the -wal or the
// database file, where only SQLite's recovery keeps them from showing.
func uncommitted(ctx context.Context, c *sql.Conn) error {
	if err := exec1(ctx, c, "PRAGMA cache_size=10", "BEGIN IMMEDIATE",
		"UPDATE t SET what = 'uncommitted' WHERE id = 1", "INSERT INTO t(id, what) VALUES(1000, 'uncommitted')"); err != nil {
		return err
	}
	for i := range UncommittedRows {
		if _, err := c.ExecContext(ctx, "INSERT INTO pad(id, pad) VALUES(?, randomblob(?))", i, rowBytes); err != nil {
			return err
		}
	}
	return nil
}

func writeWAL(ctx context.Context, p string) (bool, error) {
	c, err := open(ctx, p, "wal")
	if err != nil {
		return false, err
	}
	if err := exec1(ctx, c, "PRAGMA wal_autocheckpoint=0", schema); err != nil {
		return false, err
	}
	if err := insert(ctx, c, 1, WALCommitted, "committed"); err != nil {
		return false, err
	}
	if err := exec1(ctx, c, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return false, err
	}
	if err := insert(ctx, c, WALCommitted+1, WALOnly, "committed"); err != nil {
		return false, err
	}
	before, err := size(p + "-wal")
	if err != nil {
		return false, err
	}
	// The open transaction spills its pages into the WAL as frames
	// without a commit marker.
	if err := uncommitted(ctx, c); err != nil {
		return false, err
	}
	after, err := size(p + "-wal")
	return after > before, err
}

func writeJournal(ctx context.Context, p string) (bool, error) {
	c, err := open(ctx, p, "delete")
	if err != nil {
		return false, err
	}
	if err := exec1(ctx, c, schema); err != nil {
		return false, err
	}
	if err := insert(ctx, c, 1, JournalCommitted, "committed"); err != nil {
		return false, err
	}
	before, err := size(p)
	if err != nil {
		return false, err
	}
	if err := uncommitted(ctx, c); err != nil {
		return false, err
	}
	after, err := size(p)
	if err != nil {
		return false, err
	}
	j, err := size(p + "-journal")
	return after > before && j > 0, err
}

func size(p string) (int64, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// CheckRestored checks the databases the writer wrote, as restored at
// wal and journal (either may be empty to skip it): each holds exactly the
// committed rows, passes integrity_check, and has no -wal, -shm or
// -journal beside it. It opens them read-only and immutable, so the check
// itself changes nothing.
func CheckRestored(ctx context.Context, wal, journal string) error {
	for _, c := range []struct {
		p    string
		rows int
	}{{wal, WALCommitted + WALOnly}, {journal, JournalCommitted}} {
		if c.p == "" {
			continue
		}
		for _, s := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Lstat(c.p + s); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s%s is still there after the restore (%v)", filepath.Base(c.p), s, err)
			}
		}
		if err := checkRows(ctx, c.p, c.rows); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(c.p), err)
		}
	}
	return nil
}

func checkRows(ctx context.Context, p string, want int) error {
	u := url.URL{Scheme: "file", Path: p, RawQuery: "mode=ro&immutable=1"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return err
	}
	defer db.Close()
	var ok string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("integrity_check: %q %v", ok, err)
	}
	rows, err := db.QueryContext(ctx, "SELECT id, what FROM t ORDER BY id")
	if err != nil {
		return err
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id int
		var what string
		if err := rows.Scan(&id, &what); err != nil {
			return err
		}
		got = append(got, fmt.Sprintf("%d:%s", id, what))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var exp []string
	for i := 1; i <= want; i++ {
		exp = append(exp, fmt.Sprintf("%d:committed", i))
	}
	if strings.Join(got, ",") != strings.Join(exp, ",") {
		return fmt.Errorf("rows %v, want exactly the committed %v", got, exp)
	}
	return nil
}
