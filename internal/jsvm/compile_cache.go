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

// compileCacheSize bounds the programs kept. A program holds its code and
// goja's compiled form, a few times the source's size.
const compileCacheSize = 64

type cacheKey [sha256.Size]byte

type compileCache struct {
	mu    sync.Mutex
	order *list.List // of *cacheEntry, most recently used first
	byKey map[cacheKey]*list.Element
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
	c.byKey[k] = c.order.PushFront(&cacheEntry{key: k, prog: p})
	for c.order.Len() > compileCacheSize {
		el := c.order.Back()
		c.order.Remove(el)
		delete(c.byKey, el.Value.(*cacheEntry).key)
	}
}
