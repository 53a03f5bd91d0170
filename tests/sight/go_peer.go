// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// go_peer.go - one end of uring_peer's exchange in plain Go, built
// statically (CGO_ENABLED=0): it makes its system calls itself, so the
// switch is never loaded into it. Checks every byte it receives.
//
//	go_peer server|client PORT BYTES
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
)

func pat(id uint32, i uint64) byte {
	x := uint32(i)*2654435761 ^ id*40503
	return byte(x >> 13)
}

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "FAIL go_peer: "+f+"\n", a...)
	os.Exit(1)
}

func put(c net.Conn, id uint32, off, n uint64) {
	buf := make([]byte, 65536)
	for done := uint64(0); done < n; {
		k := n - done
		if k > uint64(len(buf)) {
			k = uint64(len(buf))
		}
		for j := uint64(0); j < k; j++ {
			buf[j] = pat(id, off+done+j)
		}
		if _, err := c.Write(buf[:k]); err != nil {
			die("write: %v", err)
		}
		done += k
	}
}

func get(c net.Conn, id uint32, off, n uint64) {
	buf := make([]byte, 65536)
	for done := uint64(0); done < n; {
		k := n - done
		if k > uint64(len(buf)) {
			k = uint64(len(buf))
		}
		r, err := c.Read(buf[:k])
		if err != nil {
			die("read after %d of %d bytes: %v", off+done, off+n, err)
		}
		for j := 0; j < r; j++ {
			if buf[j] != pat(id, off+done+uint64(j)) {
				die("stream %d: byte %d is 0x%02x, not 0x%02x", id,
					off+done+uint64(j), buf[j],
					pat(id, off+done+uint64(j)))
			}
		}
		done += uint64(r)
	}
}

func eof(c net.Conn) {
	b := make([]byte, 1)
	if n, err := c.Read(b); n != 0 || err != io.EOF {
		die("the stream's end, not %d byte(s) (%v)", n, err)
	}
}

func main() {
	if len(os.Args) != 4 {
		die("usage: go_peer server|client PORT BYTES")
	}
	addr := "127.0.0.1:" + os.Args[2]
	n, _ := strconv.ParseUint(os.Args[3], 10, 64)
	half := n / 2
	ack := []byte{'A'}
	if os.Args[1] == "server" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			die("listen: %v", err)
		}
		c, err := l.Accept()
		if err != nil {
			die("accept: %v", err)
		}
		get(c, 1, 0, half)
		if _, err := c.Write(ack); err != nil {
			die("ack: %v", err)
		}
		get(c, 1, half, n-half)
		put(c, 2, 0, n)
		eof(c)
		c.Close()
	} else {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			die("dial: %v", err)
		}
		put(c, 1, 0, half)
		if _, err := io.ReadFull(c, ack); err != nil || ack[0] != 'A' {
			die("ack: %v (0x%02x)", err, ack[0])
		}
		put(c, 1, half, n-half)
		get(c, 2, 0, n)
		c.(*net.TCPConn).CloseWrite()
		eof(c)
	}
	fmt.Println("state none")
}
