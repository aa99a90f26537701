// Package sqlitedsn names an SQLite database file to the modernc.org/sqlite
// driver the one way Lifeboat opens it: package profile to checkpoint and
// check a browser's databases, package profile/fixture to write and check
// its own.
//
// It imports nothing of the module, so profile and its fixture share it
// while neither imports the other.
package sqlitedsn

import "net/url"

// File is the data source name that opens the SQLite file p; ro opens it
// read-only and immutable (no side files are created or read). There is
// no busy wait, and temporary tables and indices stay in memory, so no
// content of p is written to a temporary file outside its folder.
func File(p string, ro bool) string {
	u := url.URL{Scheme: "file", Path: p}
	q := url.Values{}
	if ro {
		q.Set("mode", "ro")
		q.Set("immutable", "1")
	}
	q.Add("_pragma", "busy_timeout(0)")
	q.Add("_pragma", "temp_store(memory)")
	u.RawQuery = q.Encode()
	return u.String()
}
