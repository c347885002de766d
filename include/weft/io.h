/* weft/io.h - I/O calls that block the calling weft thread, not its VP.
 *
 * Each call takes the arguments of the POSIX call it is named after and returns
 * what that call returns: -1 with errno set on failure. Called from a weft thread,
 * a call that would block parks the thread (other threads run on its VP) until the
 * descriptor is ready, then retries; called from a plain OS thread, a wired thread,
 * or when weft is not running, it is the blocking system call itself.
 *
 * Each call has a _deadline form whose last argument is an absolute deadline
 * (weft_time_now() nanoseconds; WEFT_FOREVER: none). When the deadline passes
 * before the operation could be made, the call fails with errno ETIMEDOUT and
 * nothing has been transferred: the operation is cancelled and the data stays in
 * the kernel for the next call. A deadline that has already passed still lets an
 * operation that can be made at once be made (from a plain OS thread too). A write that had already sent part of its buffer
 * returns that count instead (as a blocking write interrupted by a signal does).
 *
 * How weft waits (docs/io.md): it tries the system call without blocking and, if it
 * would block, parks the thread until the I/O engine (weft_io_engine(): epoll or
 * io_uring) reports the descriptor ready. Sockets are tried with MSG_DONTWAIT: their file
 * status flags are never changed (except by weft_accept and weft_connect, below).
 * Other descriptors that can block (pipes, FIFOs, terminals, character devices)
 * get O_NONBLOCK set the first time a weft call finds they are not sockets, as Go
 * does; a plain read() on such a descriptor then fails with EAGAIN instead of
 * blocking. Regular files never block in this sense: under the epoll engine their
 * reads and writes, and weft_openat, weft_fsync and weft_close, are made directly and
 * block the VP for the length of the disk access (weft_blocking() runs such work on
 * a pool of kernel threads); the io_uring engine submits them to its ring and parks
 * the thread until they complete (a deadline then cancels the request: ETIMEDOUT if
 * it was cancelled, else its result). Two exceptions under io_uring: a read or write
 * at the file position (weft_read, weft_write, weft_readv, weft_writev) that the page
 * cache cannot serve at once runs on the weft_blocking() pool, because read(2) and
 * write(2) keep concurrent calls at one file position apart and ring requests do not
 * (its deadline is then not applied); and a thread run by the system monitor's spare
 * VP (docs/design.md) makes the file calls directly, as under epoll.
 *
 * A weft call waits even on a descriptor whose owner set O_NONBLOCK (it never
 * returns EAGAIN for "would block"), except the socket calls given MSG_DONTWAIT,
 * which return at once as the POSIX calls do.
 *
 * Closing: weft_close(fd) wakes every weft thread parked on fd; each of them fails
 * with EBADF, and none has transferred any data (nothing is lost: it had not been
 * read), except a write that had already sent part of its buffer: it returns that
 * count, as at a deadline. Close descriptors that weft threads may be waiting on with weft_close: a
 * plain close() leaves them parked until weft next checks its registrations (about
 * a second at most; docs/io.md), which ends their wait with EBADF if the number is
 * still closed, or until an event of the file that took the number. A descriptor
 * closed with close() and reused by a new open keeps weft's cached notion of its
 * kind until weft_close or a weft_openat/weft_accept returns it; at worst a call on
 * it then blocks its VP (not a _deadline call: those check that a descriptor weft made
 * non-blocking still is, and keep their deadline), or a thread that parks on it waits
 * up to about a second for its first event (weft registers a descriptor with the kernel once, and finds a
 * registration that close() dropped by checking from time to time: docs/io.md).
 *
 * Signals: a parked weft thread is not interrupted by signals (as if every handler
 * had SA_RESTART); EINTR is only returned when the system call itself returns it.
 *
 * errno is per weft thread, but a call that parked may resume the caller on another
 * VP's kernel thread, and compilers keep errno's address across calls: read errno
 * right after the call that failed, before any call that can switch (docs/design.md
 * "State that travels with a thread").
 *
 * Shutdown: weft_shutdown() waits for threads parked on I/O like any blocked thread;
 * when nothing else can run it returns WEFT_EBUSY while they stay parked. Close their
 * descriptors (weft_close) to make them return, then call it again.
 */
#ifndef WEFT_IO_H
#define WEFT_IO_H

#include <poll.h> /* POLLIN, POLLOUT: the events of weft_fd_wait and weft_fd_spawn */
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "weft/common.h"
#include "weft/thread.h"
#include "weft/time.h"

#ifdef __cplusplus
extern "C" {
#endif

/* weft_io_engine() returns the name of the I/O engine in use ("uring" or "epoll"),
 * or NULL when weft is not running. weft_init() picks it: io_uring when this build
 * has it (liburing) and the kernel runs it, else epoll. The environment variable
 * WEFT_IO=epoll or WEFT_IO=uring forces one: an unknown name, or uring in a build
 * without liburing, makes weft_init() return WEFT_EINVAL; uring that the kernel
 * refuses (too old, seccomp, kernel.io_uring_disabled) makes it return WEFT_ESYS.
 * Never switches. */
WEFT_API const char *weft_io_engine(void);

/* weft_io_parked() returns the number of weft threads parked in the calls below
 * now, waiting for their descriptor (a snapshot; a thread counts from the moment it
 * is linked on its descriptor until it has resumed). For diagnostics and tests.
 * Never switches; callable from any thread; 0 when weft is not running. */
WEFT_API long weft_io_parked(void);

/* weft_io_idle_stacks() returns how many of those threads have given their stack's
 * memory back now, after waiting longer than weft_config_t.io_idle_stack_ms (a
 * snapshot; docs/io.md "Stacks of idle threads"). For diagnostics and tests. Never
 * switches; callable from any thread; 0 when weft is not running. */
WEFT_API long weft_io_idle_stacks(void);

/* read(2), write(2). weft_write (and weft_writev, weft_send, weft_sendmsg) on a
 * stream writes the whole buffer, parking as often as needed, as a blocking write
 * does; it returns less only when an error or the deadline comes after some bytes
 * went out. weft_read returns as soon as some bytes (or end of file) are there; a
 * read of 0 bytes returns 0 at once, on a socket too. */
WEFT_API ssize_t weft_read(int fd, void *buf, size_t count);
WEFT_API ssize_t weft_write(int fd, const void *buf, size_t count);
WEFT_API ssize_t weft_read_deadline(int fd, void *buf, size_t count, uint64_t deadline);
WEFT_API ssize_t weft_write_deadline(int fd, const void *buf, size_t count, uint64_t deadline);

/* readv(2), writev(2). iovcnt as POSIX (0 to IOV_MAX, else EINVAL); checked in Linux's
 * order: a descriptor not open for the direction is EBADF first, then the count
 * (EINVAL), then iov NULL with iovcnt > 0 (EFAULT). A readv of 0 bytes returns 0 at
 * once. */
WEFT_API ssize_t weft_readv(int fd, const struct iovec *iov, int iovcnt);
WEFT_API ssize_t weft_writev(int fd, const struct iovec *iov, int iovcnt);
WEFT_API ssize_t weft_readv_deadline(int fd, const struct iovec *iov, int iovcnt, uint64_t deadline);
WEFT_API ssize_t weft_writev_deadline(int fd, const struct iovec *iov, int iovcnt, uint64_t deadline);

/* pread(2), pwrite(2): positioned, so regular files mostly (those never park). A
 * negative offset fails with EINVAL (the io_uring engine would otherwise take -1
 * for the file position). */
WEFT_API ssize_t weft_pread(int fd, void *buf, size_t count, off_t offset);
WEFT_API ssize_t weft_pwrite(int fd, const void *buf, size_t count, off_t offset);
WEFT_API ssize_t weft_pread_deadline(int fd, void *buf, size_t count, off_t offset, uint64_t deadline);
WEFT_API ssize_t weft_pwrite_deadline(int fd, const void *buf, size_t count, off_t offset,
                                      uint64_t deadline);

/* recv(2), send(2), recvmsg(2), sendmsg(2). With MSG_DONTWAIT in flags they never
 * park. recv and recvmsg with MSG_WAITALL on a stream socket park until len bytes
 * (recvmsg: the iovecs' total), end of stream or an error (returning what they got,
 * as recv does; recvmsg stops after the first part that brings ancillary data, as
 * recvmsg(2) stops after the bytes that carried descriptors, and its ancillary data
 * and msg_controllen are that part's, msg_flags the union of every part's; with
 * SO_PASSCRED every part brings credentials, so such a receive returns after its first
 * part). On a datagram or seqpacket
 * socket MSG_WAITALL changes nothing: one message, as recv(2) gives. recv with
 * MSG_PEEK | MSG_WAITALL on a TCP socket parks until len bytes are queued (left
 * queued), end of stream or an error, as recv(2) waits there (it looks again every
 * 50 us to 10 ms while fewer are queued: readiness cannot say "more"); elsewhere (an
 * AF_UNIX stream, recvmsg) it returns what is queued, at least one byte. */
WEFT_API ssize_t weft_recv(int fd, void *buf, size_t len, int flags);
WEFT_API ssize_t weft_send(int fd, const void *buf, size_t len, int flags);
WEFT_API ssize_t weft_recvmsg(int fd, struct msghdr *msg, int flags);
WEFT_API ssize_t weft_sendmsg(int fd, const struct msghdr *msg, int flags);
WEFT_API ssize_t weft_recv_deadline(int fd, void *buf, size_t len, int flags, uint64_t deadline);
WEFT_API ssize_t weft_send_deadline(int fd, const void *buf, size_t len, int flags, uint64_t deadline);
WEFT_API ssize_t weft_recvmsg_deadline(int fd, struct msghdr *msg, int flags, uint64_t deadline);
WEFT_API ssize_t weft_sendmsg_deadline(int fd, const struct msghdr *msg, int flags, uint64_t deadline);

/* accept4(2) (flags: SOCK_NONBLOCK, SOCK_CLOEXEC, as accept4). From a weft thread
 * it sets O_NONBLOCK on the listening socket (accept has no per-call form of it);
 * the accepted socket gets only the flags asked for. */
WEFT_API int weft_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
WEFT_API int weft_accept_deadline(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags,
                                  uint64_t deadline);

/* connect(2). From a weft thread on a socket without O_NONBLOCK, it sets O_NONBLOCK
 * for the connect call only and restores the flags before it parks. After
 * ETIMEDOUT the connection attempt may still go on in the kernel (as after a
 * connect interrupted by a signal): close the socket. A socket that already has
 * O_NONBLOCK gets EINPROGRESS, as connect(2) gives. An AF_UNIX listener whose
 * backlog is full makes a blocking connect(2) wait for room; the kernel offers
 * nothing to wait on, so weft_connect sleeps (parked) and tries again, from 50 us
 * doubling to 10 ms between tries, until it connects, fails otherwise, or the
 * deadline passes (ETIMEDOUT). */
WEFT_API int weft_connect(int fd, const struct sockaddr *addr, socklen_t addrlen);
WEFT_API int weft_connect_deadline(int fd, const struct sockaddr *addr, socklen_t addrlen,
                                   uint64_t deadline);

/* weft_fd_wait() parks until fd is ready for `events` (a mask of POLLIN, POLLOUT,
 * POLLPRI as in poll(2)) and returns the ready mask (poll's revents: may also hold
 * POLLERR, POLLHUP, POLLRDHUP, POLLNVAL: a number that is not open gives POLLNVAL,
 * as poll(2) does), or -1 with errno: ETIMEDOUT (deadline passed), EBADF (fd
 * negative, or closed by weft_close while waiting), EINVAL (no event asked for),
 * ENOMEM. Ready at once: returns without parking. */
WEFT_API int weft_fd_wait(int fd, short events);
WEFT_API int weft_fd_wait_deadline(int fd, short events, uint64_t deadline);

/* weft_fd_spawn() starts fn(arg) in a new detached weft thread once fd is ready for
 * `events` (POLLIN, POLLOUT, POLLPRI as weft_fd_wait), or once weft_close(fd) is
 * called (fn's first weft call on fd then fails with EBADF, also when the number names
 * a new descriptor by then: that one is not touched; a plain close(2) of it would be).
 * "fn's call" means one made by the spawned weft thread itself, wired or not: a call
 * inside a weft_blocking job it starts runs on a pool kernel thread, which weft cannot
 * tell from any other plain OS thread, and acts on whatever the number names then. So
 * make the first call on fd in fn itself. If fn ends with weft_exit before any call on
 * fd, the number keeps a mark until weft_shutdown that sends every weft call on it
 * down a slower path (correct, only slower).
 * Until then the thread holds
 * no stack: its control block and a record of a few dozen bytes are all it costs,
 * against a page or more for a thread parked in weft_read (the live part of its stack,
 * once it has waited longer than weft_config_t.io_idle_stack_ms: weft_io_idle_stacks).
 * The wait of a connection
 * between requests written as a continuation (C-Threads with continuations): a
 * server thread that finds nothing more to read calls weft_fd_spawn(fd, POLLIN,
 * serve, arg) and returns, and its stack goes back to the free list
 * (examples/http_server.c --stackless). The thread counts as parked on fd
 * (weft_io_parked) and as live (weft_shutdown answers WEFT_EBUSY while it waits). No
 * deadline: a wait to end is ended with weft_close. From a weft thread only.
 * A descriptor the engine cannot watch (one closed behind weft's back; a regular
 * file under epoll, which is always ready) starts the thread at once, and fn's own
 * call on it says what it is. Returns 0, or WEFT_EINVAL (fn NULL, no event asked
 * for, fd negative or beyond weft's table, or this is the first call on fd of a
 * weft_fd_spawn thread whose own wait on fd a weft_close ended, as above), WEFT_EPERM (not called from a weft
 * thread), WEFT_EAGAIN (cfg.max_threads), WEFT_ENOMEM. */
WEFT_API int weft_fd_spawn(int fd, short events, weft_thread_fn fn, void *arg);

/* openat(2), fsync(2): under epoll made directly (the VP blocks for the disk
 * access); under io_uring an fsync parks the thread, and weft_openat is made directly
 * when its path walk needs no disk access (the dentry cache has it) and parks the
 * thread otherwise; weft_openat_deadline always parks (in the ring). Either way an
 * open has openat's semantics: a FIFO opened without O_NONBLOCK waits for its peer
 * (made directly, blocking the VP: the system monitor then gives the VP's other
 * threads a spare). weft_openat resets weft's cached state of the
 * descriptor number it returns.
 * The deadline forms (mode: as openat's third argument, used with O_CREAT or
 * O_TMPFILE only): under io_uring, a deadline already past fails with ETIMEDOUT
 * before anything is done, and at the deadline the request is cancelled: ETIMEDOUT
 * if the cancellation took (nothing was opened or synced), else the call's own
 * result, which for an open that completed anyway is its descriptor, the caller's
 * to close (nothing is lost). Under epoll and from a plain OS thread the call is made
 * directly whatever the deadline, as reads of regular files are. Errors: those of
 * openat(2) and fsync(2), ETIMEDOUT, ENOMEM (no timer slot). */
WEFT_API int weft_openat(int dirfd, const char *path, int flags, ...);
WEFT_API int weft_openat_deadline(int dirfd, const char *path, int flags, mode_t mode,
                                  uint64_t deadline);
WEFT_API int weft_fsync(int fd);
WEFT_API int weft_fsync_deadline(int fd, uint64_t deadline);

/* close(2), after waking every weft thread parked on fd (they fail with EBADF). */
WEFT_API int weft_close(int fd);

/* ---- blocking work off the VPs ---------------------------------------------------
 * weft_blocking() runs fn(arg) on a kernel thread of a shared pool and parks the
 * calling weft thread (not its VP) until fn returns; then stores fn's result in
 * *result (if result is not NULL) and returns 0. For calls that block in the kernel
 * and have no weft form (getaddrinfo, disk I/O, a library's blocking call). fn runs
 * on a plain OS thread: it may call the blocking weft functions an OS thread may
 * call (the weft_* I/O calls above, sync objects), never weft_yield or other calls
 * for weft threads only. From a plain OS thread (or when weft is not running) fn
 * runs on the caller directly.
 * The pool starts threads on demand, up to a limit (weft_blocking_limits; default
 * 64), and lets a thread that has had nothing to do for the idle time (default
 * 10 s) exit. With every pool thread busy, further calls queue (FIFO) until one is
 * free: jobs that wait for each other need a pool thread each, and with a limit
 * below that they wait for ever, unreported (the deadlock report cannot tell a pool
 * thread that waits for a queued job from one that will finish). weft_wire() (weft/wire.h) takes its kernel threads from the same pool: a
 * thread held by a wired weft thread takes no job and does not count against the
 * limit; once unwired it is an idle pool thread again. The pool outlives
 * weft_shutdown; a child of fork(2) starts with an empty one (see weft/runtime.h on
 * fork). weft_shutdown() waits for a thread parked here as for a sleeping one: fn's
 * return wakes it (so an fn that never returns keeps weft_shutdown waiting).
 * Errors: WEFT_EINVAL (fn NULL);
 * WEFT_EAGAIN (no pool thread could be started and none that takes jobs exists; fn
 * did not run). */
WEFT_API int weft_blocking(void *(*fn)(void *), void *arg, void **result);

/* weft_blocking_limits() sets the pool's most threads (1 to 4096; threads held by
 * wired weft threads are not counted) and the idle time after which a pool thread
 * exits (nanoseconds, > 0); 0 in either leaves it. At most max_threads jobs run at
 * once, from the moment the call returns (a limit of 1 serialises the jobs); threads
 * above a lowered limit take no job and exit once idle; a raised limit starts
 * threads at once for jobs already queued (up to the new limit). Errors: WEFT_EINVAL.
 * Callable anytime. */
WEFT_API int weft_blocking_limits(int max_threads, uint64_t idle_ns);

/* weft_blocking_threads() returns the number of pool threads alive now, those held
 * by wired weft threads included (a snapshot). Callable anytime. */
WEFT_API int weft_blocking_threads(void);

#ifdef __cplusplus
}
#endif
#endif
