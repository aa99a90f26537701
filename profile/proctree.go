package profile

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The process tree of a browser, read from /proc: what decides whether a
// browser whose process is alive is paused.

// treeRunning returns "" when process pid and all its descendants are
// stopped (every thread in state T or t; an exited one, Z or X, writes
// nothing either), else why the tree counts as running. Descendants are
// found through the parent PIDs in /proc/*/stat, twice: a tree that
// changed between the two reads was not stopped.
func treeRunning(pid int) string {
	tree := descendants(pid)
	for _, p := range tree {
		if why := processRunning(p); why != "" {
			if p == pid {
				return why
			}
			return fmt.Sprintf("whose descendant process %d %s", p, why)
		}
	}
	if again := descendants(pid); !slices.Equal(tree, again) {
		return "whose process tree changed while it was checked"
	}
	return ""
}

// processRunning returns "" when every thread of process pid is stopped
// or exited (or the process is gone), else why it counts as running.
func processRunning(pid int) string {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return "" // exited since
		}
		return fmt.Sprintf("is alive and its state cannot be read (%v)", err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		state, _, ok := parseStat(b)
		if !ok {
			return "is alive and its state cannot be read"
		}
		switch state {
		case 'T', 't', 'Z', 'X':
		default:
			return fmt.Sprintf("is running (thread %s in state %c, not stopped)", t.Name(), state)
		}
	}
	return ""
}

// descendants returns pid followed by all its descendants, sorted after
// pid, from one scan of /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue // exited
			}
			if _, ppid, ok := parseStat(b); ok {
				children[ppid] = append(children[ppid], p)
			}
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	slices.Sort(out[1:])
	return out
}

// parseStat reads the state and parent PID from a /proc/PID/stat line,
// "PID (COMM) STATE PPID ...", where COMM may hold spaces and ')'.
func parseStat(b []byte) (state byte, ppid int, ok bool) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return f[0][0], ppid, err == nil
}
