//go:build linux && (amd64 || arm64)

package checkpoint

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fstatat is unix.Fstatat of name in the directory fd, without following a
// symlink. While the kernel's caches answer, it is a raw system call, one
// Go's scheduler is not told of: of an ordinary one it is told when it
// begins and ends, and hands the processor of one it sees last to another
// thread. For the lstat of every file of a
// capture, that cost a 20,000-file create about 4 ms of its 117 (A/B runs
// of 30 and 40 rounds: 116.5 against 112.6, 121.4 against 117.8, 117.9
// against 113.2 ms).
//
// A raw call keeps its processor while it waits, so once the calls wait for
// the disk (the kernel's caches do not hold the tree: lstatWaitsMax calls
// took lstatWaited or more) they are ordinary ones again, and the capture's
// workers, more of them than there are processors, wait for it side by side.
// A capture of cached files has a few calls that long too (its thread was
// descheduled, an interrupt came).
func fstatat(fd int, name string, st *unix.Stat_t) error {
	if lstatWaits.Load() > lstatWaitsMax {
		return unix.Fstatat(fd, name, st, unix.AT_SYMLINK_NOFOLLOW)
	}
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	start := time.Now()
	_, _, errno := unix.RawSyscall6(unix.SYS_NEWFSTATAT, uintptr(fd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if time.Since(start) >= lstatWaited {
		lstatWaits.Add(1)
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// lstatWaited is how long an lstat that waited for the disk takes, at least:
// one the kernel's caches answer takes a few microseconds.
var lstatWaited = 50 * time.Microsecond

// lstatWaitsMax is how many lstat calls may wait (see fstatat) before they
// are ordinary system calls: a capture of cached files has up to about 20
// that long, one of files the kernel must read hundreds (217 at 20,000 files
// here, with the kernel's caches dropped).
var lstatWaitsMax int32 = 64

// lstatWaits counts the calls that waited, in this process.
var lstatWaits atomic.Int32

// lstatOrdinary makes every lstat of this process an ordinary system call:
// for a work tree on a file system that may not answer (a network or FUSE
// one), where a raw call that hangs would hold its processor, and with it
// the collector's pauses and the handling of an interrupt.
func lstatOrdinary() { lstatWaits.Store(lstatWaitsMax + 1) }
