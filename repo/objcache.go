package repo

import (
	"sync"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// objectCacheBytes bounds the sealed bytes an objectCache keeps.
const objectCacheBytes = 32 << 20

// objectCache keeps the sealed bytes of snapshot and pin objects this
// process loaded. An object is named by the hash of its sealed bytes, so
// the bytes of a name never change: a cached object is the stored one,
// checked against its name when it was loaded, and is opened again at
// every load. Retention and prune read every snapshot and pin of the
// repository at each run; a long-lived `serve` then fetches each object
// from storage once, not at every capture. Removing an object drops it.
// When full, it drops entries at random: a miss only costs a load.
type objectCache struct {
	mu    sync.Mutex
	m     map[objectKey][]byte
	bytes int
}

type objectKey struct {
	kind crypt.ObjectKind
	id   blob.ID
}

// cached reports whether objects of kind are kept.
func cached(kind crypt.ObjectKind) bool {
	return kind == crypt.KindSnapshot || kind == crypt.KindPin
}

func (c *objectCache) get(kind crypt.ObjectKind, id blob.ID) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok := c.m[objectKey{kind, id}]
	return data, ok
}

func (c *objectCache) put(kind crypt.ObjectKind, id blob.ID, data []byte) {
	if len(data) > objectCacheBytes/64 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := objectKey{kind, id}
	if _, ok := c.m[k]; ok {
		return
	}
	if c.m == nil {
		c.m = map[objectKey][]byte{}
	}
	for k, v := range c.m {
		if c.bytes+len(data) <= objectCacheBytes {
			break
		}
		delete(c.m, k)
		c.bytes -= len(v)
	}
	c.m[k] = data
	c.bytes += len(data)
}

func (c *objectCache) drop(kind crypt.ObjectKind, id blob.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := objectKey{kind, id}
	if v, ok := c.m[k]; ok {
		delete(c.m, k)
		c.bytes -= len(v)
	}
}
