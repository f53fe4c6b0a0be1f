package jsvm

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Compiling a module costs tens of milliseconds for a big bundle (esbuild
// twice, then goja), and the same code is compiled again and again: by
// every test of a `handoff test` run, by a redeploy of unchanged code,
// by apps that deploy the same bundle, by a server loading its apps. A
// Program is immutable, so one compile is shared by all of them: Compile
// keeps the latest ones by the hash of their name and source.

// compileCacheSize bounds the programs kept, and compileCacheBytes their
// code: a program holds its code and goja's compiled form, a few times
// the code's size, and strangers' deploys must not fill the server's
// memory with programs nobody runs.
const (
	compileCacheSize  = 64
	compileCacheBytes = 32 << 20
)

type cacheKey [sha256.Size]byte

type compileCache struct {
	mu    sync.Mutex
	order *list.List // of *cacheEntry, most recently used first
	byKey map[cacheKey]*list.Element
	bytes int // the code of the programs kept
}

type cacheEntry struct {
	key  cacheKey
	prog *Program
}

var programs = &compileCache{order: list.New(), byKey: map[cacheKey]*list.Element{}}

func keyOf(filename, source string) cacheKey {
	h := sha256.New()
	h.Write([]byte(filename))
	h.Write([]byte{0})
	h.Write([]byte(source))
	var k cacheKey
	h.Sum(k[:0])
	return k
}

func (c *compileCache) get(k cacheKey) *Program {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cacheEntry).prog
	}
	return nil
}

func (c *compileCache) put(k cacheKey, p *Program) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.order.MoveToFront(el)
		return
	}
	if len(p.code) > compileCacheBytes/4 {
		return // one program would push out most others
	}
	c.byKey[k] = c.order.PushFront(&cacheEntry{key: k, prog: p})
	c.bytes += len(p.code)
	for c.order.Len() > compileCacheSize || c.bytes > compileCacheBytes {
		el := c.order.Back()
		c.order.Remove(el)
		e := el.Value.(*cacheEntry)
		delete(c.byKey, e.key)
		c.bytes -= len(e.prog.code)
	}
}
