package profile

import (
	"path"
	"strings"
)

// Action says what capture and restore do with a profile path.
type Action int

const (
	// Keep: captured into the sensitive tier and restored.
	Keep Action = iota
	// Skip: left out because the browser rebuilds it (caches, metrics,
	// SQLite side files that the pre-capture checkpoint folded in, or
	// that SQLite rebuilds).
	Skip
	// Never: never captured, and removed if found in a restored profile
	// (process locks that would make the browser refuse the profile).
	Never
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "keep"
	case Skip:
		return "skip"
	case Never:
		return "never"
	}
	return "unknown"
}

// Kind is a browser family.
type Kind string

// Browser families.
const (
	Chromium Kind = "chromium" // Chromium, Chrome, Edge, Brave...: a user-data-dir
	Firefox  Kind = "firefox"  // a Firefox root with profiles.ini, or one profile folder
)

// Rule is one line of the rule table. A Pattern without '/' matches an
// entry's name at any depth; one with '/' matches the last components of
// its path (so "Service Worker/CacheStorage" matches
// "Default/Service Worker/CacheStorage"). Patterns use path.Match syntax.
// Where several rules match, the strictest action wins (Never over Skip
// over Keep); a path no rule matches is kept, so state a newer browser
// adds is not lost.
type Rule struct {
	Kind    Kind
	Pattern string
	Action  Action
	Why     string
}

// Rules is the rule table. docs/profiles.md lists the same rules; a test
// checks that every pattern here appears there.
var Rules = []Rule{
	// Chromium: session state kept.
	{Chromium, "Local State", Keep, "browser-wide state: the profile list, and on other systems the cookie encryption key"},
	{Chromium, "Preferences", Keep, "profile settings; exit_type is reset at restore"},
	{Chromium, "Secure Preferences", Keep, "MAC-protected settings, extension registrations"},
	{Chromium, "Cookies", Keep, "cookies (SQLite; values encrypted v10/v11)"},
	{Chromium, "Network", Keep, "Network/Cookies, TransportSecurity (HSTS), Network Persistent State"},
	{Chromium, "Login Data", Keep, "saved passwords (SQLite)"},
	{Chromium, "Login Data For Account", Keep, "account-bound saved passwords (SQLite)"},
	{Chromium, "Web Data", Keep, "autofill, payment methods, search engines (SQLite)"},
	{Chromium, "Local Storage", Keep, "localStorage (LevelDB)"},
	{Chromium, "Session Storage", Keep, "sessionStorage (LevelDB)"},
	{Chromium, "IndexedDB", Keep, "IndexedDB (LevelDB and blobs)"},
	{Chromium, "Service Worker/Database", Keep, "service worker registrations (LevelDB)"},
	{Chromium, "Sessions", Keep, "open tabs and windows"},
	{Chromium, "Extensions", Keep, "installed extensions"},
	{Chromium, "Local Extension Settings", Keep, "extension storage (LevelDB)"},
	{Chromium, "Sync Extension Settings", Keep, "extension sync storage (LevelDB)"},
	{Chromium, "Extension State", Keep, "extension state (LevelDB)"},
	// Chromium: caches and diagnostics skipped.
	{Chromium, "Cache", Skip, "HTTP cache, rebuilt on demand"},
	{Chromium, "Code Cache", Skip, "compiled JavaScript/WASM cache"},
	{Chromium, "GPUCache", Skip, "GPU shader cache"},
	{Chromium, "GrShaderCache", Skip, "Skia shader cache"},
	{Chromium, "GraphiteDawnCache", Skip, "Dawn/Graphite shader cache"},
	{Chromium, "ShaderCache", Skip, "shader cache"},
	{Chromium, "DawnCache", Skip, "WebGPU shader cache"},
	{Chromium, "DawnGraphiteCache", Skip, "WebGPU shader cache"},
	{Chromium, "DawnWebGPUCache", Skip, "WebGPU shader cache"},
	{Chromium, "Media Cache", Skip, "media cache"},
	{Chromium, "component_crx_cache", Skip, "downloaded component installers"},
	{Chromium, "extensions_crx_cache", Skip, "downloaded extension installers"},
	{Chromium, "GPUPersistentCache", Skip, "GPU program cache"},
	{Chromium, "AutofillAiModelCache", Skip, "cache of an on-device model, fetched again"},
	{Chromium, "optimization_guide_hint_cache_store", Skip, "cache of server hints, fetched again"},
	{Chromium, "Crashpad", Skip, "crash reports"},
	{Chromium, "BrowserMetrics", Skip, "usage metrics"},
	{Chromium, "Service Worker/CacheStorage", Skip, "Cache API storage: a cache by contract"},
	{Chromium, "Service Worker/ScriptCache", Skip, "service worker script cache"},
	// Chromium: process locks, never.
	{Chromium, "SingletonLock", Never, "names the running process (host-pid); a copy makes the browser refuse the profile"},
	{Chromium, "SingletonSocket", Never, "the running process's socket"},
	{Chromium, "SingletonCookie", Never, "the running process's cookie"},
	// Firefox: session state kept.
	{Firefox, "profiles.ini", Keep, "the profile list"},
	{Firefox, "installs.ini", Keep, "default profile per installation"},
	{Firefox, "cookies.sqlite", Keep, "cookies (SQLite, values in clear)"},
	{Firefox, "logins.json", Keep, "saved passwords, encrypted with key4.db"},
	{Firefox, "key4.db", Keep, "the key that decrypts logins.json"},
	{Firefox, "cert9.db", Keep, "certificate trust settings"},
	{Firefox, "storage/default", Keep, "localStorage, IndexedDB and Cache API per site"},
	{Firefox, "sessionstore.jsonlz4", Keep, "open tabs and windows"},
	{Firefox, "sessionstore-backups", Keep, "recent session backups"},
	{Firefox, "prefs.js", Keep, "preferences"},
	// Firefox: caches and diagnostics skipped.
	{Firefox, "cache2", Skip, "HTTP cache"},
	{Firefox, "startupCache", Skip, "startup cache"},
	{Firefox, "shader-cache", Skip, "shader cache"},
	{Firefox, "crashes", Skip, "crash reports"},
	{Firefox, "minidumps", Skip, "crash dumps"},
	{Firefox, "datareporting", Skip, "telemetry"},
	{Firefox, "saved-telemetry-pings", Skip, "telemetry"},
	// Firefox: process locks, never.
	{Firefox, "lock", Never, "symlink naming the running process"},
	{Firefox, ".parentlock", Never, "the running process's lock file"},
	{Firefox, "parent.lock", Never, "the running process's lock file (older name)"},
}

// sqliteSide are the suffixes of SQLite's side files; restore removes any
// found beside a database (after replaying a -wal or -journal into it).
var sqliteSide = []string{"-wal", "-shm", "-journal"}

// The rules for SQLite's side files. They apply to a path the table
// keeps, and depend on the browser's State (Detect):
//   - -shm is SQLite's index of the -wal, rebuilt from the -wal: never
//     needed;
//   - a browser that is not running: Prepare checkpoints every database
//     first (the -wal moved into the database and emptied, a hot
//     -journal rolled back), so -wal and -journal carry nothing;
//   - a paused browser: no checkpoint can run (the frozen writer may hold
//     the database's locks), so -wal and -journal are captured with their
//     database, one crash-consistent unit since nothing writes while the
//     browser is stopped; restore replays them (Validate).
var (
	shmRule = Rule{Pattern: "*-shm", Action: Skip,
		Why: "SQLite's index of the -wal, rebuilt from the -wal by SQLite"}
	sideRuleStopped = Rule{Pattern: "*-wal, *-journal", Action: Skip,
		Why: "checkpointed into the database before capture (see below); stale ones are removed at restore"}
	sideRulePaused = Rule{Pattern: "*-wal, *-journal", Action: Keep,
		Why: "no checkpoint while the writer is frozen: captured with their database as one crash-consistent unit, replayed into it and removed at restore"}
)

// Decide returns the action for rel, a slash path relative to a profile
// root of kind k whose browser is not running, and the rule that chose it
// (nil: no rule matched, Keep).
func Decide(k Kind, rel string) (Action, *Rule) {
	return DecideState(k, NotRunning, rel)
}

// DecideState is Decide for a profile whose browser is in state s: while
// it is Paused, SQLite -wal and -journal files are kept.
func DecideState(k Kind, s State, rel string) (Action, *Rule) {
	act, why := Keep, (*Rule)(nil)
	comps := strings.Split(rel, "/")
	for i := range Rules {
		r := &Rules[i]
		if r.Kind != k || r.Action < act || (why != nil && r.Action == act) {
			continue
		}
		if matchRule(r.Pattern, comps) {
			act, why = r.Action, r
		}
	}
	if act != Keep {
		return act, why
	}
	base := comps[len(comps)-1]
	side := func(suf string) bool { return strings.HasSuffix(base, suf) && len(base) > len(suf) }
	switch {
	case side("-shm"):
		return Skip, &shmRule
	case (side("-wal") || side("-journal")) && s == Paused:
		return Keep, &sideRulePaused
	case side("-wal") || side("-journal"):
		return Skip, &sideRuleStopped
	}
	return act, why
}

// matchRule matches a pattern against any suffix of components; a
// pattern without '/' is one component, matched at any depth.
func matchRule(pat string, comps []string) bool {
	pc := strings.Split(pat, "/")
	for end := len(comps); end >= len(pc); end-- {
		ok := true
		for j := range pc {
			if m, _ := path.Match(pc[j], comps[end-len(pc)+j]); !m {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Filter returns the capture filter of a profile of kind k whose browser
// is not running: true for the paths to capture.
func Filter(k Kind) func(rel string) bool {
	return filterState(k, NotRunning)
}

// CaptureFilter returns p's capture filter for the browser state Prepare
// found (p.State): true for the paths to capture.
func (p Profile) CaptureFilter() func(rel string) bool {
	return filterState(p.Kind, p.State)
}

func filterState(k Kind, s State) func(rel string) bool {
	return func(rel string) bool {
		a, _ := DecideState(k, s, rel)
		return a == Keep
	}
}
