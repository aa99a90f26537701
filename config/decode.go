package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parse turns a raw value into the typed value of its kind: string, int,
// time.Duration, float64 (kPercent) or []string. It returns a message
// instead when the value is wrong. With files set, a kFile is opened to
// check it is a readable file, and closed unread.
func (s *spec) parse(v *value, files bool) (any, string) {
	if s.list() {
		return s.parseList(v)
	}
	if s.kind == kInt || s.kind == kCount {
		return s.parseInt(v)
	}
	str, ok := v.raw.(string)
	if !ok {
		return nil, "want " + s.want() + ", got " + describe(v.raw)
	}
	str = strings.TrimSpace(str)
	switch s.kind {
	case kFile:
		if !files {
			break
		}
		if msg := checkReadable(str); msg != "" {
			return nil, msg
		}
	case kEnvName:
		if !validEnvName(str) {
			return nil, fmt.Sprintf("%q is not an environment variable name (letters, digits and _, not starting with a digit); give the variable's name, not its value", str)
		}
	case kEnum:
		if !slices.Contains(s.enum, str) {
			return nil, fmt.Sprintf("want one of %s, got %q", strings.Join(s.enum, ", "), str)
		}
	case kListen:
		if msg := checkListen(str); msg != "" {
			return nil, msg
		}
	case kURL:
		u, msg := checkURL(str)
		if msg != "" {
			return nil, msg
		}
		return u, ""
	case kDuration, kDurationOff, kDurationAny:
		return s.parseDuration(str)
	case kPercent:
		return parsePercent(str)
	}
	return str, ""
}

func (s *spec) want() string {
	switch s.kind {
	case kInt, kCount:
		return "an integer"
	case kDuration, kDurationOff, kDurationAny:
		return `a duration string such as "30s", "5m" or "1h30m"`
	case kPercent:
		return `a percentage string such as "5%", or "unlimited"`
	case kList:
		return "an array of strings"
	case kArgv:
		return `an argv array of strings such as ["pkill", "-STOP", "-f", "agent"]`
	}
	return "a string"
}

// describe names a raw value's type (and a scalar's value) for messages.
func describe(raw any) string {
	switch v := raw.(type) {
	case string:
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a date or time (%v)", raw)
}

func (s *spec) parseInt(v *value) (any, string) {
	var n int64
	switch raw := v.raw.(type) {
	case int64:
		n = raw
	case string:
		if !v.text {
			return nil, "want an integer, got " + describe(raw)
		}
		var err error
		if n, err = strconv.ParseInt(strings.TrimSpace(raw), 10, 64); err != nil {
			return nil, fmt.Sprintf("want an integer, got %q", raw)
		}
	default:
		return nil, "want an integer, got " + describe(raw)
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return nil, fmt.Sprintf("%d is out of range", n)
	}
	if s.kind == kInt && (n < int64(s.min) || (s.max > 0 && n > int64(s.max))) {
		if s.max > 0 {
			return nil, fmt.Sprintf("%d is out of range: want %d to %d", n, s.min, s.max)
		}
		return nil, fmt.Sprintf("%d is out of range: want at least %d", n, s.min)
	}
	return int(n), ""
}

func (s *spec) parseDuration(str string) (any, string) {
	if s.kind == kDurationOff && (str == "off" || str == "0") {
		return time.Duration(0), ""
	}
	d, err := time.ParseDuration(str)
	if err != nil {
		hint := `a Go duration such as "90s", "5m" or "1h30m"`
		if s.kind == kDurationOff {
			hint += `, or "off"`
		}
		return nil, fmt.Sprintf("bad duration %q: want %s", str, hint)
	}
	switch {
	case s.kind == kDuration && d <= 0:
		return nil, fmt.Sprintf("duration %q must be greater than 0", str)
	case s.kind == kDurationOff && d < 0:
		return nil, fmt.Sprintf(`duration %q is negative: want 0 or "off" to disable, or a positive duration`, str)
	}
	return d, ""
}

// parsePercent reads max_unused as `lifeboat prune --max-unused` does:
// "5%" or "5" is 0.05, "unlimited" is 1, and 0 is a tiny fraction (repack
// every pack with anything unused).
func parsePercent(str string) (any, string) {
	if str == "unlimited" {
		return 1.0, ""
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(str, "%"), 64)
	if err != nil || v < 0 || v > 100 || math.IsNaN(v) {
		return nil, fmt.Sprintf(`want a percentage from 0%% to 100%% (such as "5%%"), or "unlimited", got %q`, str)
	}
	if v == 0 {
		return 1e-9, ""
	}
	return v / 100, ""
}

// parseList reads an array of strings; text from the environment or a
// flag is split at commas.
func (s *spec) parseList(v *value) (any, string) {
	var out []string
	switch raw := v.raw.(type) {
	case string:
		if !v.text {
			return nil, "want " + s.want() + ", got " + describe(raw)
		}
		for _, f := range strings.Split(raw, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
	case []any:
		for i, e := range raw {
			str, ok := e.(string)
			if !ok {
				return nil, fmt.Sprintf("want %s, got %s at index %d", s.want(), describe(e), i)
			}
			out = append(out, str)
		}
	default:
		return nil, "want " + s.want() + ", got " + describe(raw)
	}
	if s.kind == kArgv {
		if len(out) == 0 {
			return nil, "empty command: want " + s.want()
		}
		if strings.TrimSpace(out[0]) == "" {
			return nil, "the command's first element (the program) is empty"
		}
	}
	return out, ""
}

// checkReadable checks that path is a file this process can read: a
// regular file is opened and closed unread; a pipe or device (such as
// /dev/fd/N) is only looked up, since opening it could block.
func checkReadable(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Sprintf("cannot read file %s: %v", path, unwrapPathErr(err))
	}
	switch {
	case st.IsDir():
		return fmt.Sprintf("%s is a directory, not a file", path)
	case !st.Mode().IsRegular():
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("cannot read file %s: %v", path, unwrapPathErr(err))
	}
	f.Close()
	return ""
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func validEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func checkListen(s string) string {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("want host:port (such as 127.0.0.1:8080), got %q", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("port %q of %q is not a number from 0 to 65535", port, s)
	}
	return ""
}

// checkURL accepts http:// and https:// URLs without credentials, query or
// fragment, and returns the URL without a trailing slash.
func checkURL(s string) (string, string) {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "", fmt.Sprintf("want an http:// or https:// URL such as https://lifeboat.internal:8080, got %q", s)
	case u.User != nil:
		return "", "the URL holds credentials; give the client's token by file (token_file), never inline"
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Sprintf("the URL %q has a query or fragment; want scheme://host[:port][/path]", s)
	}
	return strings.TrimRight(s, "/"), ""
}

// validName reports whether s is a provider instance name or workspace id:
// 1-128 of [A-Za-z0-9._-], starting with a letter or digit.
func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

const nameRule = "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
