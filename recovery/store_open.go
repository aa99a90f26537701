package recovery

import (
	"context"
	"strings"

	"lifeboat/recovery/pgstate"
)

// StoreOptions say where the state store is.
type StoreOptions struct {
	// Dir is the embedded store's directory (state.db), used when URL is
	// empty.
	Dir string
	// URL, a postgres:// or postgresql:// URL, names a PostgreSQL database
	// that several servers share.
	URL string
	// Password, when set, is the database password (instead of one in URL).
	Password string
	// MaxConns bounds the database connections; 0 for the default.
	MaxConns int32
}

// IsDatabaseURL reports whether s names a PostgreSQL state store.
func IsDatabaseURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// OpenStoreAt opens the state store o names: PostgreSQL when o.URL is
// set, else the embedded store in o.Dir.
func OpenStoreAt(ctx context.Context, o StoreOptions) (*Store, error) {
	if o.URL == "" {
		return OpenStore(o.Dir)
	}
	db, err := pgstate.Open(ctx, pgstate.Options{URL: o.URL, Password: o.Password, MaxConns: o.MaxConns})
	if err != nil {
		return nil, err
	}
	return NewStore(db), nil
}
