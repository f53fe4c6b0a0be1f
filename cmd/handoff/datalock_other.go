//go:build !unix || solaris || aix

package main

// lockDataDir does not lock here: this system has no flock, and a lock
// file without one would outlive a crashed server and block its restart.
func lockDataDir(dir, next string) (release func(), err error) {
	return func() {}, nil
}
