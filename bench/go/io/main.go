// Command io is the Go baseline of the I1 and I2 rows (bench/io/I_peers.c has the
// pthreads and epoll servers, examples/echo_server.c and examples/http_server.c weft's):
// a server on 127.0.0.1 started by bench/io/I_run.py, which prints "PORT <n>" and serves
// until killed. One goroutine per connection, as Go programs are written; the runtime's
// netpoller parks the goroutine on a read that would block.
//
//	echo     I1: every byte read is written back (the net package)
//	http     I2: the fixed 13-byte "Hello, world\n" response with keep-alive, answered
//	         by the loop of examples/http_server.c over a net.Conn: requests read up to
//	         their blank line, pipelined requests answered in order
//	nethttp  I2: the same response from net/http (it adds a Date header)
//
//	usage: io -proto echo|http|nethttp [-port 0]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
)

var response = []byte("HTTP/1.1 200 OK\r\n" +
	"Content-Type: text/plain\r\n" +
	"Content-Length: 13\r\n" +
	"\r\n" +
	"Hello, world\n")

var connClose = []byte("connection: close")

func serveEcho(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 16384)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func serveHTTP(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 16384)
	have := 0
	for {
		end := bytes.Index(buf[:have], []byte("\r\n\r\n"))
		if end < 0 {
			if have == len(buf) {
				return // head too large
			}
			n, err := c.Read(buf[have:])
			if n <= 0 || err != nil && n == 0 {
				return
			}
			have += n
			continue
		}
		head := end + 4
		closeAfter := bytes.Contains(bytes.ToLower(buf[:head]), connClose)
		if _, err := c.Write(response); err != nil {
			return
		}
		copy(buf, buf[head:have])
		have -= head
		if closeAfter {
			return
		}
	}
}

func main() {
	proto := flag.String("proto", "echo", "echo, http or nethttp")
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: a free one, printed)")
	flag.Parse()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "io:", err)
		os.Exit(1)
	}
	fmt.Printf("PORT %d\n", ln.Addr().(*net.TCPAddr).Port)
	switch *proto {
	case "nethttp":
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "13")
			w.Write(response[len(response)-13:])
		})
		err = http.Serve(ln, h)
	case "echo", "http":
		serve := serveEcho
		if *proto == "http" {
			serve = serveHTTP
		}
		for {
			c, aerr := ln.Accept()
			if aerr != nil {
				err = aerr
				break
			}
			go serve(c)
		}
	default:
		fmt.Fprintln(os.Stderr, "io: -proto echo|http|nethttp")
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "io:", err)
	os.Exit(1)
}
